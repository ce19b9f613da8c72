#!/usr/bin/env python3
"""Gateway CPU per request: a plugin route vs the native plugin vs none.

A benchmark, not a test: it prints figures and asserts nothing (issue 17's
target is "the wasm route costs at most 1 µs of gateway CPU per request
more than the native one, mean"; issue 12's is 3 µs for QuickJS
`persistent`: `--routes gopl,jsvm-quickjs --gateway-args '--jsvm-threads 0'`).

To try this:
  1. cargo build --release -p gateway -p loadgen -p add-header
  2. apt-get install -y apache2-utils valgrind   (valgrind for --callgrind)
  3. python3 gateway/benches/wasm_cpu.py [--rounds 7] [-n 10000] [--callgrind]
       [--routes plain,gopl,wasm] [--threads 2] [--gateway-args '...']

One gateway (the release build, `--threads 2`) serves the repo's own
definitions of the routes (default /plain/, /gopl/ and /wasm/; also /jsvm/
and /jsvm-quickjs/) (apis/*.json, pointed at a
mock-upstream on a free port). Each round runs the seed's workload,
`ab -n N -c 10` (a new connection per request), once per route, the order
rotating from round to round so no route always runs first or after the
same neighbour. For each run it reads the gateway's CPU time, all threads,
from /proc/<pid>/task/*/schedstat (nanoseconds on CPU, user and system).

Printed: per route the median and min-max µs per request over the rounds,
then the paired difference of each plugin route against /plain/ and
against the native plugin (/gopl/) within each round, with the mean's 95%
t interval (the machine is shared and noisy: differences inside one round
cancel most of the drift). The middleware
call time the gateway itself records (GET /tyk/stats) is printed too.

With --callgrind: user instructions per request of a one-worker gateway
per route, as (Ir(n2) - Ir(n1)) / (n2 - n1) over two bounded runs under
valgrind, so start-up and shutdown cancel out (repeats within ~1.5%).

GATEWAY_BIN measures another gateway binary (a before/after comparison);
BIN_DIR another profile's binaries and native plugin (target/debug).
GO_LIB_B=/path/lib.so adds the route /gopl-go-b/: the seed's Go plugin
built by another version of the Go adapter, beside /gopl-go/ (the build in
target/release), e.g.
  plugins/go-adapter/build.sh plugins/go-add-header /tmp/before.so  (on the old commit)
  GO_LIB_B=/tmp/before.so python3 gateway/benches/wasm_cpu.py --routes gopl,gopl-go,gopl-go-b
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
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_cpu import cpu_ns, free_port, interval, wait_port  # noqa: E402  (the module beside this script)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# BIN_DIR measures another profile's build (e.g. target/debug); the
# definitions' `target/release/` plugin paths follow it.
REL = os.environ.get("BIN_DIR", os.path.join(ROOT, "target", "release"))
GATEWAY = os.environ.get("GATEWAY_BIN", os.path.join(REL, "gateway"))
GATEWAY_ARGS = []  # --gateway-args, split on spaces
# Route (listen path without slashes) -> the definition in apis/ serving it.
DEFINITIONS = {"plain": "plain-hello.json", "gopl": "gopl-hello.json", "wasm": "wasm-hello.json",
               "jsvm": "jsvm-hello.json", "jsvm-quickjs": "jsvm-quickjs.json",
               "jsvm-response": "jsvm-response.json", "jsvm-virtual": "jsvm-virtual.json",
               "jsvm-quickjs-response": "jsvm-quickjs-response.json",
               "jsvm-quickjs-virtual": "jsvm-quickjs-virtual.json",
               "jsvm-tykjson": "jsvm-tykjson.json",
               # The seed's main.go through the Go adapter (`loadgen bench`
               # builds target/release/libgo_add_header.so when Go is installed).
               "gopl-go": "gopl-go-hello.json", "gopl-go-b": "gopl-go-hello.json"}
# What each route's middleware leaves in the body (checked before measuring).
MARKS = {"gopl": "X-Custom-GoPlugin", "gopl-go": "X-Custom-GoPlugin", "gopl-go-b": "X-Custom-GoPlugin", "wasm": "X-Custom-Wasm",
         "jsvm": "X-Custom-JSVM", "jsvm-quickjs": "X-Custom-JSVM",
         "jsvm-response": "X-Custom-JSVM-Response",
         "jsvm-virtual": "hello from a virtual endpoint",
         "jsvm-quickjs-response": "X-Custom-JSVM-Response",
         "jsvm-quickjs-virtual": "hello from a virtual endpoint",
         "jsvm-tykjson": "X-Custom-JSVM"}
ROUTES = ["plain", "gopl", "wasm"]
SECRET = "wasm-cpu-bench"


def write_apis(upstream_port):
    """The repo's definitions of the three routes, pointed at the mock and
    with plugin paths made absolute (they are relative to the repo root)."""
    d = tempfile.mkdtemp(prefix="wasm-cpu-apis-")
    for route in ROUTES:
        name = DEFINITIONS[route]
        with open(os.path.join(ROOT, "apis", name)) as f:
            api = json.load(f)
        api["proxy"]["target_url"] = f"http://127.0.0.1:{upstream_port}"
        for entry in api.get("custom_middleware", {}).get("pre", []):
            path = entry["path"].replace("target/release/", os.path.relpath(REL, ROOT) + "/")
            entry["path"] = os.path.join(ROOT, path)
        if route == "gopl-go-b":
            if not os.environ.get("GO_LIB_B"):
                raise SystemExit("route gopl-go-b needs GO_LIB_B=/path/to/the/other/libgo_add_header.so")
            api["api_id"], api["proxy"]["listen_path"] = "gopl-go-b", "/gopl-go-b/"
            api["custom_middleware"]["pre"][0]["path"] = os.path.abspath(os.environ["GO_LIB_B"])
            name = "gopl-go-b.json"
        with open(os.path.join(d, name), "w") as f:
            json.dump(api, f)
    return d


def start_gateway(apis, threads, wrapper=()):
    port = free_port()
    cmd = [*wrapper, GATEWAY, "--apis", apis, "--listen", f"127.0.0.1:{port}",
           "--threads", str(threads), "--secret", SECRET, *GATEWAY_ARGS]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, 60 if wrapper else 10)
    return port, p


def check_route(port, route):
    """The route must run its middleware, or the figures mean nothing."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{route}/hello/", timeout=5) as r:
        body = r.read().decode()
    want = MARKS.get(route)
    if want and want.lower() not in body.lower():
        raise SystemExit(f"/{route}/ did not run its middleware: {body}")


def ab(port, route, n):
    url = f"http://127.0.0.1:{port}/{route}/hello/"
    out = subprocess.run(["ab", "-q", "-n", str(n), "-c", "10", url],
                         capture_output=True, text=True, timeout=600).stdout
    failed = int(re.search(r"Failed requests:\s+(\d+)", out).group(1))
    non2xx = re.search(r"Non-2xx responses:\s+(\d+)", out)
    return failed + (int(non2xx.group(1)) if non2xx else 0)


def stats(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/tyk/stats",
                                 headers={"X-Tyk-Authorization": SECRET})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)["apis"]


def reset_stats(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/tyk/stats", method="DELETE",
                                 headers={"X-Tyk-Authorization": SECRET})
    urllib.request.urlopen(req, timeout=5).close()


def spread(xs):
    return f"{statistics.median(xs):7.2f} ({min(xs):.2f} to {max(xs):.2f})"


def measure(apis, rounds, n, threads):
    port, gw = start_gateway(apis, threads)
    try:
        routes = list(ROUTES)
        k_routes = len(routes)
        for route in routes:
            check_route(port, route)
            ab(port, route, min(n, 2000))  # warm-up: pools, caches, page faults
        cpu = {r: [] for r in routes}
        calls = {r: [] for r in routes}
        for k in range(rounds):
            order = routes[k % k_routes:] + routes[:k % k_routes]
            for route in order:
                reset_stats(port)
                before = cpu_ns(gw.pid)
                failed = ab(port, route, n)
                cpu[route].append((cpu_ns(gw.pid) - before) / 1000 / n)
                if failed:
                    print(f"  /{route}/: {failed} failed or non-2xx", file=sys.stderr)
                for s in stats(port):
                    if s["count"]:
                        calls[route].append((s["p50_us"], s["mean_us"]))
            print(f"round {k + 1}/{rounds} done", file=sys.stderr)
        return cpu, calls
    finally:
        gw.send_signal(signal.SIGTERM)
        gw.wait(timeout=30)


def report(cpu, calls, rounds, n, threads):
    print(f"gateway CPU µs per request, --threads {threads}, ab -n {n} -c 10, "
          f"median (min to max) of {rounds} rotated rounds:")
    for route, xs in cpu.items():
        print(f"  /{route + '/':14} {spread(xs)}")
    print("paired differences within each round, µs per request:")
    pairs = [(r, "plain") for r in cpu if r != "plain" and "plain" in cpu]
    if "gopl" in cpu:
        pairs += [(r, "gopl") for r in cpu if r not in ("plain", "gopl")]
    for a, b in pairs:
        d = [x - y for x, y in zip(cpu[a], cpu[b])]
        print(f"  /{a}/ - /{b}/: median {spread(d)}  {interval(d)}")
    print("middleware call time the gateway recorded (p50, mean µs per run):")
    for route in cpu:
        p50 = [c[0] for c in calls[route]]
        mean = [c[1] for c in calls[route]]
        if p50:
            print(f"  /{route}/: p50 {spread(p50)}  mean {spread(mean)}")


def callgrind_run(apis, route, n, out, concurrency=10):
    """Runs a one-worker gateway under callgrind while it serves `n`
    requests of `route` (`ab -c 10` unless told), its profile written to
    `out`."""
    port, p = start_gateway(apis, 1, ["valgrind", "--tool=callgrind",
                                      f"--callgrind-out-file={out}"])
    try:
        check_route(port, route)
        subprocess.run(["ab", "-q", "-n", str(n), "-c", str(concurrency),
                        f"http://127.0.0.1:{port}/{route}/hello/"],
                       capture_output=True, timeout=900, check=True)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=300)
    return out


def callgrind_ir(apis, route, n):
    """Total user instructions of a one-worker gateway serving `n` requests."""
    out = callgrind_run(apis, route, n, tempfile.mktemp(suffix=".callgrind"))
    with open(out) as f:
        total = next(int(l.split()[1]) for l in f
                     if l.startswith("summary:") or l.startswith("totals:"))
    os.unlink(out)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--routes", default=",".join(ROUTES),
                    help=f"comma-separated, of {', '.join(DEFINITIONS)}")
    ap.add_argument("--threads", type=int, default=2, help="gateway worker threads")
    ap.add_argument("--gateway-args", default="",
                    help="more gateway flags, e.g. '--jsvm-threads 0'")
    args = ap.parse_args()
    ROUTES[:] = args.routes.split(",")
    unknown = [r for r in ROUTES if r not in DEFINITIONS]
    if unknown:
        raise SystemExit(f"unknown route(s) {unknown}: known are {list(DEFINITIONS)}")
    GATEWAY_ARGS[:] = args.gateway_args.split()
    if not shutil.which("ab"):
        raise SystemExit("ab is needed (apt-get install -y apache2-utils)")
    up_port = free_port()
    mock = subprocess.Popen([os.path.join(REL, "mock-upstream"), "--listen",
                             f"127.0.0.1:{up_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    apis = write_apis(up_port)
    try:
        wait_port(up_port)
        cpu, calls = measure(apis, args.rounds, args.n, args.threads)
        report(cpu, calls, args.rounds, args.n, args.threads)
        if args.callgrind:
            if not shutil.which("valgrind"):
                raise SystemExit("valgrind is needed for --callgrind")
            n1, n2 = 300, 1500
            print(f"user instructions per request (callgrind, one worker, "
                  f"(Ir({n2}) - Ir({n1})) / {n2 - n1}):")
            for route in ROUTES:
                a = callgrind_ir(apis, route, n1)
                b = callgrind_ir(apis, route, n2)
                print(f"  /{route}/: {(b - a) / (n2 - n1):.0f}")
    finally:
        mock.send_signal(signal.SIGTERM)
        mock.wait(timeout=30)
        shutil.rmtree(apis, ignore_errors=True)


if __name__ == "__main__":
    main()
