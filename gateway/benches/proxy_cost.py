#!/usr/bin/env python3
"""Proxy cost per request on /plain/ (no middleware): this gateway vs nginx.

A benchmark, not a test: it prints figures and asserts nothing (issue 16).

To try this:
  1. cargo build --release -p gateway -p loadgen
  2. apt-get install -y nginx-light apache2-utils valgrind   (nginx optional)
  3. python3 gateway/benches/proxy_cost.py [--rounds 5] [-n 10000] [--callgrind]
     [--c1000] [--syscalls] [--baseline OTHER_GATEWAY_BINARY]

What it measures, alternating the proxies inside each round (the machine
is shared and noisy, so alternation and CPU time beat req/s):
  - CPU µs per request of the proxy process (all threads; for nginx the
    master and its workers), from /proc/<pid>/task/*/schedstat (ns on CPU),
    under `ab -n N -c 10` (a new connection per request, the seed's
    workload) and, if wrk is installed, `wrk -t1 -c10` keep-alive.
  - with --c1000: loadgen -n N -c 1000 (new connections) as a third load,
    and its p99 latency per proxy (both listen with a backlog of 4096),
    also as a paired difference per round against nginx.
  - requests per second of each run, and the machine's idle time per
    request (/proc/stat: CPU the three processes left unused while the
    load ran, which CPU per process cannot show: `perf sched` once caught
    the gateway's worker moving between the cores in lock step with wrk
    where nginx's stayed on one), both also paired per round against nginx.
  - VmRSS of each proxy after all rounds (for nginx, master and workers).
  - with --syscalls (needs `perf` and the kernel's syscall tracepoints):
    after the rounds, one more run of each load per proxy with `perf stat`
    attached, counting the proxy's system calls per request and those
    that failed with EAGAIN (a read or accept that found nothing: work
    for nothing). `strace -c` cannot show the second: it slows the
    process so much that its reads find data where untraced ones do not.
  - with --callgrind: user instructions per request of the gateway with one
    worker and of nginx with one process (`master_process off`), under the
    same `ab -c 10`, as (Ir(n2) - Ir(n1)) / (n2 - n1) from two bounded
    callgrind runs each, so startup and shutdown cancel out; and, with wrk,
    under `wrk -t1 -c10` (counters zeroed after a 2 s warm-up, then 5 s
    counted, over the requests wrk completed).
Prints median and min-max per proxy and workload.
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_cpu import cpu_ns, free_port, idle_ns, interval, wait_port, wrk_requests  # noqa: E402  (the module beside this script)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REL = os.path.join(ROOT, "target", "release")
# GATEWAY_BIN measures another build (e.g. before/after a change).
GATEWAY = os.environ.get("GATEWAY_BIN", os.path.join(REL, "gateway"))


def start_gateway(apis, threads, upstream_port, binary=None):
    port = free_port()
    p = subprocess.Popen(
        [binary or GATEWAY, "--apis", apis, "--listen", f"127.0.0.1:{port}", "--threads", str(threads)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return port, p, lambda: [p.pid]


NGINX_CONF = """worker_processes {workers};
pid {dir}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fcgi; uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;
    upstream backend {{ server 127.0.0.1:{up}; keepalive 64; keepalive_requests 1000000; }}
    server {{
        listen 127.0.0.1:{port} reuseport backlog=4096;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        location /plain/ {{ proxy_pass http://backend/; }}
    }}
}}
"""


def start_nginx(workers, upstream_port, tmp):
    port = free_port()
    d = tempfile.mkdtemp(dir=tmp)
    with open(f"{d}/nginx.conf", "w") as f:
        f.write(NGINX_CONF.format(workers=workers, dir=d, up=upstream_port, port=port))
    p = subprocess.Popen(["nginx", "-p", d, "-c", f"{d}/nginx.conf", "-g", "daemon off;"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)

    def pids():
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True)
        return [p.pid] + [int(x) for x in kids.stdout.split()]
    return port, p, pids


def run_load(kind, port, n):
    url = f"http://127.0.0.1:{port}/plain/"
    if kind == "ab-c10":
        cmd = ["ab", "-q", "-n", str(n), "-c", "10", url]
    elif kind == "loadgen-c1000":
        cmd = [os.path.join(REL, "loadgen"), "-q", "-n", str(n), "-c", "1000", url]
    else:
        return wrk_requests(url, 3), 0, None
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
    failed = int(re.search(r"Failed requests:\s+(\d+)", out).group(1))
    p99 = re.search(r"^\s*99%\s+([\d.]+)", out, re.M)
    return n, failed, float(p99.group(1)) if p99 else None


def count_syscalls(pids, run):
    """Runs `run()` (which returns the requests it completed) with `perf
    stat` counting the system calls of `pids` (all their threads): (calls,
    calls that failed with EAGAIN) per request, or None without perf."""
    fd, out = tempfile.mkstemp(prefix="perf-syscalls-")
    os.close(fd)
    perf = subprocess.Popen(
        ["perf", "stat", "-x,", "-o", out,
         "-e", "raw_syscalls:sys_enter",
         "-e", "raw_syscalls:sys_exit", "--filter", "ret==-11",
         "-p", ",".join(str(p) for p in pids)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached before the load starts
    done = run()
    perf.send_signal(signal.SIGINT)
    perf.wait(timeout=30)
    counts = {}
    try:
        with open(out) as f:
            for line in f:
                fields = line.strip().split(",")
                if len(fields) > 2 and fields[0].isdigit():
                    counts[fields[2]] = int(fields[0])
        os.unlink(out)
    except OSError:
        return None
    if "raw_syscalls:sys_enter" not in counts or not done:
        return None
    return counts["raw_syscalls:sys_enter"] / done, counts.get("raw_syscalls:sys_exit", 0) / done


def rss_kib(pids):
    """VmRSS of `pids`, summed, in KiB."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (FileNotFoundError, StopIteration):
            pass
    return total


def gateway_cmd(apis, port, binary=None):
    return [binary or GATEWAY, "--apis", apis, "--listen", f"127.0.0.1:{port}", "--threads", "1"]


def nginx_cmd(upstream_port, tmp):
    """nginx as one process (no master), for callgrind."""
    def cmd(port):
        d = tempfile.mkdtemp(dir=tmp)
        with open(f"{d}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(workers=1, dir=d, up=upstream_port, port=port))
        return ["nginx", "-p", d, "-c", f"{d}/nginx.conf", "-g", "daemon off; master_process off;"]
    return cmd


def callgrind_ir(command, n):
    """Total user instructions of `command(port)` serving `n` ab requests."""
    port = free_port()
    out = tempfile.mktemp(suffix=".callgrind")
    p = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + command(port),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, 60)
    subprocess.run(["ab", "-q", "-n", str(n), "-c", "10", f"http://127.0.0.1:{port}/plain/"],
                   capture_output=True, timeout=600)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)
    with open(out) as f:
        total = next(int(l.split()[1]) for l in f if l.startswith("summary:") or l.startswith("totals:"))
    os.unlink(out)
    return total


def callgrind_wrk_ir(command, seconds=5):
    """User instructions per request of `command(port)` under `wrk -t1
    -c10` (kept-alive connections): counters zeroed after a 2 s warm-up,
    then `seconds` counted, over the requests wrk completed in them."""
    port = free_port()
    out = tempfile.mktemp(suffix=".callgrind")
    p = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + command(port),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, 60)
        url = f"http://127.0.0.1:{port}/plain/"

        def control(what):
            subprocess.run(["callgrind_control", what, str(p.pid)], capture_output=True,
                           timeout=120, check=True)

        wrk_requests(url, 2)
        control("-z")
        served = wrk_requests(url, seconds)
        control("-d")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
    with open(out + ".1") as f:
        total = next(int(l.split()[1]) for l in f if l.startswith("summary:") or l.startswith("totals:"))
    for f in (out, out + ".1"):
        if os.path.exists(f):
            os.unlink(f)
    return total / served


def spread(xs):
    return f"{statistics.median(xs):7.1f} ({min(xs):.1f}-{max(xs):.1f})"


def paired(series, load):
    """Per round, gateway (and baseline) minus nginx with as many workers:
    (label, differences) for each pair measured in every round."""
    for t in (1, 2):
        for who in ("gateway", "baseline"):
            ours = series.get((f"{who} --threads {t}", load))
            theirs = series.get((f"nginx {t} worker(s)", load))
            if ours and theirs and len(ours) == len(theirs):
                yield f"{who} - nginx, {t} worker(s)", [a - b for a, b in zip(ours, theirs)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--c1000", action="store_true", help="add loadgen -c 1000 (new connections)")
    ap.add_argument("--no-wrk", action="store_true")
    ap.add_argument("--syscalls", action="store_true",
                    help="count each proxy's system calls per request with perf (one more run per load)")
    ap.add_argument("--baseline", metavar="GATEWAY",
                    help="another gateway binary measured in the same rounds (before/after)")
    args = ap.parse_args()
    for tool in ["ab"]:
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is needed (apt-get install -y apache2-utils)")
    tmp = tempfile.mkdtemp(prefix="proxy-cost-")
    apis = os.path.join(tmp, "apis")
    os.mkdir(apis)
    up_port = free_port()
    with open(os.path.join(apis, "plain.json"), "w") as f:
        f.write('{"name":"plain","api_id":"plain","org_id":"default","active":true,'
                '"use_keyless":true,"proxy":{"listen_path":"/plain/","target_url":'
                f'"http://127.0.0.1:{up_port}","strip_listen_path":true}}}}')
    mock = subprocess.Popen([os.path.join(REL, "mock-upstream"), "--listen", f"127.0.0.1:{up_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [mock]
    try:
        wait_port(up_port)
        proxies = {}
        for t in (1, 2):
            port, p, pids = start_gateway(apis, t, up_port)
            procs.append(p)
            proxies[f"gateway --threads {t}"] = (port, pids)
            if args.baseline:
                port, p, pids = start_gateway(apis, t, up_port, args.baseline)
                procs.append(p)
                proxies[f"baseline --threads {t}"] = (port, pids)
        if shutil.which("nginx"):
            for w in (1, 2):
                port, p, pids = start_nginx(w, up_port, tmp)
                procs.append(p)
                proxies[f"nginx {w} worker(s)"] = (port, pids)
        loads = ["ab-c10"] + (["wrk-c10-keepalive"] if shutil.which("wrk") and not args.no_wrk else [])
        if args.c1000:
            loads.append("loadgen-c1000")
        results = {(name, load): [] for name in proxies for load in loads}
        tails = {(name, load): [] for name in proxies for load in loads}  # p99, ms
        rates = {(name, load): [] for name in proxies for load in loads}  # requests per second
        idles = {(name, load): [] for name in proxies for load in loads}  # µs per request
        for r in range(args.rounds):
            for load in loads:
                for name, (port, pids) in proxies.items():
                    before, idle, start = cpu_ns(pids()), idle_ns(), time.monotonic()
                    done, failed, p99 = run_load(load, port, args.n)
                    used = cpu_ns(pids()) - before
                    rates[(name, load)].append(done / (time.monotonic() - start))
                    idles[(name, load)].append((idle_ns() - idle) / 1000 / done)
                    if p99 is not None:
                        tails[(name, load)].append(p99)
                    if failed:
                        print(f"  {name} {load}: {failed} failed requests", file=sys.stderr)
                    results[(name, load)].append(used / 1000 / done)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        print(f"proxy CPU µs per request on /plain/, median (min-max) of {args.rounds} alternated rounds")
        for load in loads:
            for name in proxies:
                print(f"  {load:18} {name:20} {spread(results[(name, load)])}")
        # The machine drifts from round to round (the two cores are shared
        # with the load generator and the upstream): a difference taken
        # inside each round cancels most of it.
        print("paired difference per round, gateway minus nginx with as many workers, µs per request:")
        for load in loads:
            for label, d in paired(results, load):
                print(f"  {load:18} {label}: {interval(d)}")
        print("requests per second (wall time of the load, ab's and loadgen's start-up included), "
              "median (min-max):")
        for load in loads:
            for name in proxies:
                print(f"  {load:18} {name:20} {spread(rates[(name, load)])}")
        print("machine idle µs per request (/proc/stat, both cores), median (min-max):")
        for load in loads:
            for name in proxies:
                print(f"  {load:18} {name:20} {spread(idles[(name, load)])}")
        print("paired difference per round, gateway minus nginx: requests per second, idle µs per request:")
        for load in loads:
            for (label, d), (_, e) in zip(paired(rates, load), paired(idles, load)):
                print(f"  {load:18} {label}: {interval(d)}; {interval(e)}")
        if "loadgen-c1000" in loads:
            # Both listen with a backlog of 4096 (the gateway's, and nginx's
            # `backlog=4096` above), so the queue in front is the same.
            print("loadgen -c 1000 p99 latency, ms, median (min-max) of the rounds:")
            for name in proxies:
                if tails[(name, "loadgen-c1000")]:
                    print(f"  {name:20} {spread(tails[(name, 'loadgen-c1000')])}")
            # p99 drifts with the machine as CPU does: paired by round too.
            print("paired p99 difference per round, gateway minus nginx with as many workers, ms:")
            for label, d in paired(tails, "loadgen-c1000"):
                print(f"  {label}: {interval(d)}")
        time.sleep(2)
        print("VmRSS after the rounds:")
        for name, (port, pids) in proxies.items():
            print(f"  {name:20} {rss_kib(pids()) / 1024:6.1f} MiB")
        if args.syscalls:
            if not shutil.which("perf"):
                raise SystemExit("perf is needed for --syscalls (apt-get install -y linux-perf)")
            print("system calls per request (perf stat, one run each), all / failed with EAGAIN:")
            for load in loads:
                for name, (port, pids) in proxies.items():
                    got = count_syscalls(pids(), lambda: run_load(load, port, args.n)[0])
                    if got is None:
                        print(f"  {load:18} {name:20} (perf could not count: are the syscall "
                              "tracepoints readable? try as root)")
                    else:
                        print(f"  {load:18} {name:20} {got[0]:5.2f} / {got[1]:4.2f}")
        if args.callgrind:
            if not shutil.which("valgrind"):
                raise SystemExit("valgrind is needed for --callgrind")
            n1, n2 = 500, 2500
            subjects = {"gateway --threads 1": lambda port: gateway_cmd(apis, port)}
            if args.baseline:
                subjects["baseline --threads 1"] = lambda port: gateway_cmd(apis, port, args.baseline)
            if shutil.which("nginx"):
                subjects["nginx, one process"] = nginx_cmd(up_port, tmp)
            for name, command in subjects.items():
                a = callgrind_ir(command, n1)
                b = callgrind_ir(command, n2)
                print(f"{name} user instructions per request (callgrind, ab -c 10): "
                      f"{(b - a) / (n2 - n1):.0f}", flush=True)
                if shutil.which("wrk") and not args.no_wrk:
                    print(f"{name} user instructions per request (callgrind, wrk -t1 -c10 "
                          f"keep-alive): {callgrind_wrk_ir(command):.0f}", flush=True)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
