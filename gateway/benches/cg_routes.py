#!/usr/bin/env python3
"""Where a route's instructions go, function by function, against another.

A benchmark, not a test: it prints figures and asserts nothing. It is the
accounting behind the instruction figures quoted in the README and in the
notes of issues 12 and 16 (what `/jsvm/` adds over `/gopl/`, what `/gopl/`
adds over `/plain/`).

To try this:
  1. cargo build --release -p gateway -p loadgen -p add-header
  2. apt-get install -y apache2-utils valgrind
  3. python3 gateway/benches/cg_routes.py --routes plain,gopl
     python3 gateway/benches/cg_routes.py --routes gopl,jsvm \\
         --gateway-args '--jsvm-threads 0' --inclusive 'gateway::js|boa_gc::Collector'
     python3 gateway/benches/cg_routes.py --routes plain -k   (kept-alive connections)
     python3 gateway/benches/cg_routes.py --routes plain --wrk 5   (wrk -t1 -c10, as issue 16)

For each route, a one-worker gateway (the release build) runs under
`valgrind --tool=callgrind`, serving N1 requests of `ab -c 10` (a new
connection per request, the seed's workload) to warm up; its counters
are then zeroed (`callgrind_control -z`), it serves N2 - N1 more and
they are dumped: every figure is instructions over those requests, so
start-up (which varies from run to run: the call clock's calibration is
bounded in wall time, not in instructions), the first requests and
shutdown are left out. Printed: user instructions per request of each
route; then, for each later route, the functions whose own (self)
instructions per request differ most from the first route's; with
--inclusive REGEX, the inclusive instructions per request of the
functions matching REGEX (what a call costs with everything it calls).
The callgrind files stay in --keep DIR if given (read them with
`callgrind_annotate`). With --rounds R the routes run R times,
alternated, and the totals and the difference are given as median
(min-max) over the rounds: one run's total moves by ~100 instructions
from run to run with ab -c 10, which is the size of what issue 16's
`/gopl/` target is decided by.
"""

import argparse
import collections
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wasm_cpu as w  # noqa: E402  (the script beside this one: definitions, gateway start)
from proc_cpu import free_port, wait_port, wrk_requests  # noqa: E402

# "  1,234 (12.3%)  file:function [object]": the count, then the name.
LINE = re.compile(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$")


def annotate(path, inclusive):
    """Program total and per-function counts of one callgrind file."""
    cmd = ["callgrind_annotate", "--auto=no", "--threshold=100", "--show-percs=no",
           f"--inclusive={'yes' if inclusive else 'no'}", path]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    total, per_fn = None, collections.Counter()
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        count, name = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in name:
            total = count
        elif total is not None:
            per_fn[name] += count
    return total, per_fn


def run(apis, route, warm, n, keep, concurrency, keepalive=False, wrk=None, tag=""):
    """A one-worker gateway under callgrind serves `warm` requests of
    `route`, its counters are zeroed, it serves `n` more and they are
    dumped: the dump's file (only those `n` requests are in it) and `n`.
    With `wrk` (seconds), the load is `wrk -t1` for 2 s, then for `wrk`
    seconds, and `n` is what wrk counted in the second run."""
    out = os.path.join(keep, f"{route}{tag}.callgrind")
    port, p = w.start_gateway(apis, 1, ["valgrind", "--tool=callgrind",
                                        f"--callgrind-out-file={out}"])
    try:
        w.check_route(port, route)
        load = lambda k: subprocess.run(  # noqa: E731
            ["ab", "-q", *(["-k"] if keepalive else []), "-n", str(k), "-c", str(concurrency),
             f"http://127.0.0.1:{port}/{route}/hello/"],
            capture_output=True, timeout=900, check=True)
        if wrk:
            warm, n = 2, wrk
            load = lambda seconds: wrk_requests(  # noqa: E731
                f"http://127.0.0.1:{port}/{route}/hello/", seconds, concurrency)
        load(warm)
        control = lambda what: subprocess.run(  # noqa: E731
            ["callgrind_control", what, str(p.pid)], capture_output=True, timeout=120, check=True)
        control("-z")
        served = load(n)
        control("-d")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=300)
    return out + ".1", (served if wrk else n)


def per_request(a, b, n):
    return collections.Counter({k: (b[k] - a.get(k, 0)) / n for k in b})


def spread(values, sign=False):
    """`median (min-max)` of `values`, rounded to whole instructions."""
    f = "{:+,.0f}" if sign else "{:,.0f}"
    return (f"{f.format(statistics.median(values))} "
            f"({f.format(min(values))} to {f.format(max(values))})")


def short(name, width=140):
    return name if len(name) <= width else "..." + name[-(width - 3):]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--routes", default="plain,gopl",
                    help=f"comma-separated, the first is the base; of {', '.join(w.DEFINITIONS)}")
    ap.add_argument("--n1", type=int, default=300)
    ap.add_argument("--n2", type=int, default=1500)
    ap.add_argument("-c", "--concurrency", type=int, default=10,
                    help="ab's -c (10, the seed's); with 1 no two requests share a wakeup, so an "
                         "A/B of two builds repeats within a few instructions")
    ap.add_argument("-k", "--keepalive", action="store_true",
                    help="ab -k: requests on kept-alive connections (the cost of a request "
                         "without its connection's accept and close)")
    ap.add_argument("--wrk", type=int, metavar="SECONDS",
                    help="load with `wrk -t1 -c C` (kept-alive HTTP/1.1, no Connection header) "
                         "for 2 s, then SECONDS counted (instead of ab and --n1/--n2): issue 16's "
                         "keep-alive workload")
    ap.add_argument("--gateway-args", default="", help="more gateway flags, e.g. '--jsvm-threads 0'")
    ap.add_argument("--inclusive", metavar="REGEX", help="also print inclusive costs of these functions")
    ap.add_argument("--top", type=int, default=40, help="functions listed per comparison")
    ap.add_argument("--keep", metavar="DIR", help="keep the callgrind files here")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the routes this many times, alternated (each round starts one "
                         "route later): per route and per difference, the median with min-max "
                         "over the rounds, and the function table averaged over them. With "
                         "ab -c 10 one run's total moves by ~100 from run to run (how requests "
                         "share wakeups, malloc's state); a function's own count does not")
    args = ap.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    routes = args.routes.split(",")
    unknown = [r for r in routes if r not in w.DEFINITIONS]
    if unknown:
        raise SystemExit(f"unknown route(s) {unknown}: known are {list(w.DEFINITIONS)}")
    for tool in ("wrk" if args.wrk else "ab", "valgrind", "callgrind_annotate"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is needed (apt-get install -y apache2-utils wrk valgrind)")
    w.ROUTES[:] = routes
    w.GATEWAY_ARGS[:] = args.gateway_args.split()
    # Go's signal-based preemption (a Go plugin, `gopl-go`) trips an
    # assertion in callgrind's signal handling; cooperative preemption
    # does not change what a call executes.
    os.environ.setdefault("GODEBUG", "asyncpreemptoff=1")
    keep = args.keep or tempfile.mkdtemp(prefix="cg-routes-")
    os.makedirs(keep, exist_ok=True)
    up_port = free_port()
    mock = subprocess.Popen([os.path.join(w.REL, "mock-upstream"), "--listen",
                             f"127.0.0.1:{up_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    apis = w.write_apis(up_port)
    selves = {r: collections.Counter() for r in routes}
    totals = {r: [] for r in routes}
    inclusive = {r: collections.Counter() for r in routes}
    try:
        wait_port(up_port)
        for rnd in range(args.rounds):
            k = rnd % len(routes)
            tag = f".r{rnd + 1}" if args.rounds > 1 else ""
            for route in routes[k:] + routes[:k]:
                f, n = run(apis, route, args.n1, args.n2 - args.n1, keep, args.concurrency,
                           args.keepalive, args.wrk, tag)
                t, own = annotate(f, False)
                totals[route].append(t / n)
                for name, v in per_request({}, own, n).items():
                    selves[route][name] += v / args.rounds
                if args.inclusive:
                    for name, v in per_request({}, annotate(f, True)[1], n).items():
                        inclusive[route][name] += v / args.rounds
                when = f" (round {rnd + 1})" if args.rounds > 1 else ""
                print(f"/{route}/: {t / n:,.0f} user instructions per request ({n:,} requests)"
                      f"{when}", flush=True)
    finally:
        mock.send_signal(signal.SIGTERM)
        mock.wait(timeout=30)
        shutil.rmtree(apis, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(keep, ignore_errors=True)
    if args.rounds > 1:
        print(f"\nover {args.rounds} rounds, median (min-max):")
        for route in routes:
            print(f"  /{route}/: {spread(totals[route])}")
        for route in routes[1:]:
            d = [a - b for a, b in zip(totals[route], totals[routes[0]])]
            print(f"  /{route}/ - /{routes[0]}/: {spread(d, sign=True)} (per round)")
    base = routes[0]
    for route in routes[1:]:
        names = set(selves[route]) | set(selves[base])
        diff = {k: selves[route].get(k, 0) - selves[base].get(k, 0) for k in names}
        gap = statistics.median(a - b for a, b in zip(totals[route], totals[base]))
        print(f"\n/{route}/ - /{base}/: {gap:+,.0f} per request; "
              f"the functions whose own instructions differ most:")
        for k, v in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:args.top]:
            print(f"  {v:+9,.0f}  {short(k)}")
    if args.inclusive:
        pattern = re.compile(args.inclusive)
        for route in routes:
            rows = [(v, k) for k, v in inclusive[route].items() if pattern.search(k) and v >= 50]
            print(f"\n/{route}/: inclusive instructions per request of functions matching "
                  f"{args.inclusive!r}:")
            for v, k in sorted(rows, reverse=True)[:args.top]:
                print(f"  {v:9,.0f}  {short(k)}")


if __name__ == "__main__":
    main()
