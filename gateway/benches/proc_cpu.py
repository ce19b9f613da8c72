"""CPU time of running processes, read from /proc, and the loopback port
helpers, for the bench scripts beside this file (wasm_cpu.py, proxy_cost.py).

/proc/<pid>/task/<tid>/schedstat's first field is the nanoseconds the thread
has spent on a CPU (user and system together), where /proc/<pid>/stat counts
in clock ticks (10 ms): per-request figures of a few µs need nanoseconds.
Summing over the tasks counts every thread of a multi-threaded server. A
thread that exits takes its figure with it, so measure long-lived servers
(whose workers live as long as they do), as both scripts do.
"""

import os
import socket
import time


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


def free_port():
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, limit=10.0):
    """Returns once something accepts on `port`; exits after `limit` s."""
    end = time.time() + limit
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")
