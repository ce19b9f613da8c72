/* What one thread hand-off costs on this machine: two threads ping-pong
 * through a futex, N round trips, pinned to one CPU (argument: the CPU) or
 * left to the scheduler (-1). Prints wall and process CPU time per round
 * trip. The VM-thread design (gateway/src/js/vmthread.rs, affinity.rs) is
 * sized by these two figures.
 *
 * To try this: gcc -O2 -pthread gateway/benches/wakeup_cost.c -o /tmp/wakeup_cost
 *              /tmp/wakeup_cost 0; /tmp/wakeup_cost -1
 * Measured on the 2-core test VM: pinned 5.4-6.8 µs CPU per round trip;
 * unpinned 44 µs wall, 29.5 µs CPU. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>
static atomic_int turn = 0; // 0: main's, 1: worker's
static int N = 200000;
static void fwait(atomic_int *a, int v){ while (atomic_load(a)==v) syscall(SYS_futex, a, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0); }
static void fwake(atomic_int *a){ syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }
static int pin = -1;
static void dopin(int c){ if(c<0) return; cpu_set_t s; CPU_ZERO(&s); CPU_SET(c,&s); sched_setaffinity(0,sizeof s,&s);}
void *worker(void *x){ dopin(pin); for(int i=0;i<N;i++){ fwait(&turn,0); atomic_store(&turn,0); fwake(&turn);} return 0;}
int main(int argc,char**argv){ pin = argc>1?atoi(argv[1]):-1; dopin(pin); pthread_t t; pthread_create(&t,0,worker,0);
 struct timespec a,b; clock_gettime(CLOCK_MONOTONIC,&a); struct timespec ca,cb; clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&ca);
 for(int i=0;i<N;i++){ atomic_store(&turn,1); fwake(&turn); fwait(&turn,1);} 
 clock_gettime(CLOCK_MONOTONIC,&b); clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&cb); pthread_join(t,0);
 printf("pin=%d round trip wall %.2f us, cpu %.2f us\n", pin, ((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/N/1e3, ((cb.tv_sec-ca.tv_sec)*1e9+(cb.tv_nsec-ca.tv_nsec))/N/1e3);}
