"""CPU time of running processes, read from /proc, for the bench scripts
beside this file (wasm_cpu.py, proxy_cost.py).

/proc/<pid>/task/<tid>/schedstat's first field is the nanoseconds the thread
has spent on a CPU (user and system together), where /proc/<pid>/stat counts
in clock ticks (10 ms): per-request figures of a few µs need nanoseconds.
Summing over the tasks counts every thread of a multi-threaded server. A
thread that exits takes its figure with it, so measure long-lived servers
(whose workers live as long as they do), as both scripts do.
"""

import os


def cpu_ns(pids):
    """Nanoseconds on CPU so far of every thread of `pids` (one pid or an
    iterable of them). A process or thread that exits while it is being read
    counts as zero: the caller measures long-lived servers."""
    if isinstance(pids, int):
        pids = [pids]
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:
                pass  # a thread that exited between listdir and open
    return total
