#!/usr/bin/env python3
"""What routing costs as the number of APIs grows: user instructions per
request with 1, 15 and 2,000 APIs, for the route the old longest-first
scan reached first, in the middle and last.

A benchmark, not a test: it prints figures and asserts nothing. It is the
measurement behind the figures in `gateway/src/router.rs`'s header.

To try this:
  1. cargo build --release -p gateway -p loadgen
  2. apt-get install -y apache2-utils valgrind
  3. python3 gateway/benches/cg_many_apis.py [--apis 1,15,2000] [--rounds 3]
     GATEWAY_BIN=/tmp/gateway-before python3 gateway/benches/cg_many_apis.py
         (another build, for a before/after comparison)

For each count N, N definitions without middleware are written: the
listen paths of the bench's own definitions (`apis/*.json`, `/plain/`
first, so N = 1 is `/plain/` alone and N = 15 the bench's routes), then
`/api0/`, `/api1/`, ... Each API proxies to the mock upstream under a base
path of its own (`/own<i>`, listen path stripped), so every route is first
checked to answer with its own API. One one-worker gateway per N runs
under `valgrind --tool=callgrind`; for each measured route, `ab -c 10`
sends --n1 requests to warm up, the counters are zeroed
(`callgrind_control -z`), ab sends --n2 - --n1 more and the counters are
dumped: each figure is user instructions over those requests alone (see
`cg_routes.py`, whose reading of the dumps this script shares), in all
and inclusive in `Proxy::plan` (which routes the request, `Router::find`
inlined, and makes the head's checks): the whole request's count moves
by some hundreds from run to run, `Proxy::plan`'s by a few. The routes
measured are the first, middle and last the old router scanned: its order
was longest listen path first, equal lengths in load (file name) order;
the last is where the scan cost most. With --rounds R each figure is the
median (min-max) of R runs.
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wasm_cpu as w  # noqa: E402  (the script beside this one: binaries, gateway start)
from cg_routes import annotate  # noqa: E402
from proc_cpu import free_port, wait_port  # noqa: E402


# The function that routes a request (`Router::find` is inlined into it)
# and makes its other checks: its inclusive count is the routing's cost
# without the rest of the request's noise.
PLAN = re.compile(r"gateway::proxy::Proxy::plan \[")


def bench_listen_paths():
    """The listen paths of the bench's definitions, `/plain/` first."""
    paths = []
    for name in sorted(os.listdir(os.path.join(w.ROOT, "apis"))):
        if name.endswith(".json"):
            with open(os.path.join(w.ROOT, "apis", name)) as f:
                paths.append(json.load(f)["proxy"]["listen_path"])
    paths.sort(key=lambda p: p != "/plain/")
    return paths


def listen_paths(n):
    bench = bench_listen_paths()
    return (bench + [f"/api{i}/" for i in range(max(0, n - len(bench)))])[:n]


def write_apis(paths, upstream_port):
    """One definition per listen path, loaded in this order (file names
    sort as the list does)."""
    d = tempfile.mkdtemp(prefix="cg-many-apis-")
    for i, lp in enumerate(paths):
        api = {"name": f"api{i}", "api_id": f"api{i}", "org_id": "default", "active": True,
               "use_keyless": True,
               "proxy": {"listen_path": lp, "strip_listen_path": True,
                         "target_url": f"http://127.0.0.1:{upstream_port}/own{i}"}}
        with open(os.path.join(d, f"{i:05}.json"), "w") as f:
            json.dump(api, f)
    return d


def scan_order(paths):
    """Indices of `paths` in the order the old router compared them."""
    return sorted(range(len(paths)), key=lambda i: -len(paths[i]))


def picked(paths):
    """(label, index) of the first-, middle- and last-scanned routes."""
    order = scan_order(paths)
    marks = [("first", order[0]), ("middle", order[len(order) // 2]), ("last", order[-1])]
    seen, out = set(), []
    for label, i in marks:
        if i not in seen:
            seen.add(i)
            out.append((label, i))
    return out


def check_own(port, lp, i):
    """The route answers with its own API: the mock echoes the path it got."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{lp}hello/", timeout=30) as r:
        got = json.load(r)["path"]
    if got != f"/own{i}/hello/":
        raise SystemExit(f"{lp}hello/ reached {got}, not API {i}'s /own{i}/hello/")


def measure(paths, routes, apis, warm, n, concurrency, keep, tag):
    """Instructions per request of each of `routes` ((label, index)), all
    served by one gateway under callgrind."""
    out = os.path.join(keep, f"n{len(paths)}{tag}.callgrind")
    port, p = w.start_gateway(apis, 1, ["valgrind", "--tool=callgrind",
                                        f"--callgrind-out-file={out}"])
    figures = {}
    try:
        for dump, (label, i) in enumerate(routes, start=1):
            lp = paths[i]
            check_own(port, lp, i)
            load = lambda k: subprocess.run(  # noqa: E731
                ["ab", "-q", "-n", str(k), "-c", str(concurrency),
                 f"http://127.0.0.1:{port}{lp}hello/"],
                capture_output=True, timeout=900, check=True)
            control = lambda what: subprocess.run(  # noqa: E731
                ["callgrind_control", what, str(p.pid)], capture_output=True, timeout=120,
                check=True)
            load(warm)
            control("-z")
            load(n)
            control("-d")
            total, _ = annotate(f"{out}.{dump}", False)
            _, inclusive = annotate(f"{out}.{dump}", True)
            plan = sum(v for k, v in inclusive.items() if PLAN.search(k))
            figures[label] = (total / n, plan / n)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=300)
    return figures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--apis", default="1,15,2000", help="comma-separated counts of APIs")
    ap.add_argument("--n1", type=int, default=300)
    ap.add_argument("--n2", type=int, default=1500)
    ap.add_argument("-c", "--concurrency", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--keep", metavar="DIR", help="keep the callgrind files here")
    args = ap.parse_args()
    for tool in ("ab", "valgrind", "callgrind_annotate", "callgrind_control"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is needed (apt-get install -y apache2-utils valgrind)")
    counts = [int(c) for c in args.apis.split(",")]
    keep = args.keep or tempfile.mkdtemp(prefix="cg-many-apis-out-")
    os.makedirs(keep, exist_ok=True)
    up_port = free_port()
    mock = subprocess.Popen([os.path.join(w.REL, "mock-upstream"), "--listen",
                             f"127.0.0.1:{up_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dirs = []
    print(f"gateway {w.GATEWAY}; ab -c {args.concurrency}, {args.n2 - args.n1} requests "
          f"measured after {args.n1}; user instructions per request")
    try:
        wait_port(up_port)
        for count in counts:
            paths = listen_paths(count)
            apis = write_apis(paths, up_port)
            dirs.append(apis)
            routes = picked(paths)
            runs = {label: [] for label, _ in routes}
            for rnd in range(args.rounds):
                tag = f".r{rnd + 1}" if args.rounds > 1 else ""
                got = measure(paths, routes, apis, args.n1, args.n2 - args.n1,
                              args.concurrency, keep, tag)
                for label, v in got.items():
                    runs[label].append(v)
            for label, i in routes:
                cells = []
                for k in (0, 1):
                    xs = [r[k] for r in runs[label]]
                    spread = (f" ({min(xs):,.0f} to {max(xs):,.0f})" if len(xs) > 1 else "")
                    cells.append(f"{statistics.median(xs):8,.0f}{spread}")
                print(f"  {count:5} APIs, {label:6} scanned {paths[i] + 'hello/':28} "
                      f"{cells[0]:26} Proxy::plan {cells[1]}", flush=True)
    finally:
        mock.send_signal(signal.SIGTERM)
        mock.wait(timeout=30)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(keep, ignore_errors=True)


if __name__ == "__main__":
    main()
