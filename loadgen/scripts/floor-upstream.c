// The least an HTTP/1.1 upstream can do per request, as a yardstick for
// mock-upstream (loadgen/scripts/upstream-floor.sh): one thread, one
// level-triggered epoll, one recv and one send per request, a fixed
// response the size of mock-upstream's answer to the gateway. It parses
// nothing but the blank line that ends a head (requests without bodies
// only), so it is no server to use, just the kernel's cost of a keep-alive
// request/response on loopback plus almost nothing.
// usage: floor-upstream PORT
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
static const char body[] = "{\"headers\":{\"Accept\":\"*/*\",\"User-Agent\":\"ApacheBench/2.3\",\"Via\":\"1.1 gw-ce3aeb5f84198214\",\"X-Forwarded-For\":\"127.0.0.1\"},\"message\":\"hello from mock upstream\",\"method\":\"GET\",\"path\":\"/hello/\"}";
int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: floor-upstream PORT\n"); return 2; }
  char resp[1024];
  int rl = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(ls, (void *)&a, sizeof a) || listen(ls, 1024)) { perror("bind"); return 1; }
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls}, evs[64];
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  char buf[16384];
  for (;;) {
    int n = epoll_wait(ep, evs, 64, -1);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == ls) {
        int c = accept4(ls, 0, 0, SOCK_NONBLOCK);
        if (c < 0) continue;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
        continue;
      }
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r <= 0) { close(fd); continue; }
      // Requests have no body here: one response per end of head.
      for (ssize_t j = 3; j < r; j++)
        if (buf[j] == '\n' && buf[j-1] == '\r' && buf[j-2] == '\n' && buf[j-3] == '\r') send(fd, resp, rl, 0);
    }
  }
}
