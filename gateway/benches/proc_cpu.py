"""CPU time of running processes, read from /proc, and the loopback port
helpers, a `wrk` run and the paired-difference interval, for the bench
scripts beside this file (wasm_cpu.py, proxy_cost.py, cg_routes.py).

/proc/<pid>/task/<tid>/schedstat's first field is the nanoseconds the thread
has spent on a CPU (user and system together), where /proc/<pid>/stat counts
in clock ticks (10 ms): per-request figures of a few µs need nanoseconds.
Summing over the tasks counts every thread of a multi-threaded server. A
thread that exits takes its figure with it, so measure long-lived servers
(whose workers live as long as they do), as both scripts do.
"""

import os
import re
import socket
import subprocess
import statistics
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


def idle_ns():
    """The machine's idle time so far, all CPUs together (idle and iowait
    from /proc/stat), in ns. Its growth per request under a load shows the
    CPUs left unused while requests were in flight (wakeup chains, lock
    step), which CPU time per process cannot."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return (int(fields[4]) + int(fields[5])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def wrk_requests(url, seconds, connections=10):
    """`wrk -t1 -c<connections>` on kept-alive connections to `url` for
    `seconds`: the requests it completed (read from its summary line)."""
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", url],
                         capture_output=True, text=True, timeout=seconds + 120, check=True).stdout
    m = re.search(r"(\d+) requests in", out)
    if not m:
        raise SystemExit(f"no request count in wrk's output:\n{out}")
    return int(m.group(1))


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


def interval(d):
    """Mean of paired differences with a 95% t interval (half-width)."""
    if len(d) < 2:
        return f"mean {statistics.mean(d):.2f}"
    # Two-sided 95% Student t quantiles for small samples; 1.96 beyond.
    t = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31,
         9: 2.26, 10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}
    df = len(d) - 1
    q = t.get(df) or next((v for k, v in sorted(t.items()) if k >= df), 1.96)
    half = q * statistics.stdev(d) / len(d) ** 0.5
    m = statistics.mean(d)
    return f"mean {m:.2f} (95% {m - half:.2f} to {m + half:.2f})"
