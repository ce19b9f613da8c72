#!/usr/bin/env python3
"""What a chunked upload of tiny chunks costs the gateway and the upstream.

A benchmark, not a test: it prints figures and asserts nothing. One client
sends N one-byte chunks (`1\\r\\nx\\r\\n`, written 10,000 at a time) to a
route without middleware, whose body streams to mock-upstream; the CPU
time of the gateway and of the upstream over the upload is read from
/proc. Each chunk used to reach the upstream as a chunk of its own, one
`writev` each; `gateway/src/body.rs` now joins the frames the client's
connection has ready (`RequestBody::poll_joined`).

To try this:
  1. cargo build --release -p gateway -p loadgen
  2. python3 gateway/benches/upload_chunks.py            (300,000 chunks, 3 rounds)
     python3 gateway/benches/upload_chunks.py --chunks 100000 --rounds 5
     BEFORE=/path/to/older/gateway python3 gateway/benches/upload_chunks.py
        (that binary and target/release/gateway, alternated each round)

Each run starts a one-worker gateway of its own in front of one
mock-upstream; printed per run: the status, the gateway's and the
upstream's CPU seconds; then per binary the median (min-max).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_cpu import cpu_ns, free_port, wait_port  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REL = os.path.join(ROOT, "target", "release")


def upload(port, chunks):
    """Sends the chunked upload; the answer's status."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(120)
    s.sendall(b"POST /plain/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
              b"Connection: close\r\n\r\n")
    block = b"1\r\nx\r\n" * 10_000
    for _ in range(chunks // 10_000):
        s.sendall(block)
    s.sendall(b"0\r\n\r\n")
    answer = b""
    while True:
        part = s.recv(65536)
        if not part:
            break
        answer += part
    s.close()
    return answer.split(b" ", 2)[1].decode() if answer else "no answer"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    binaries = {"gateway": os.path.join(REL, "gateway")}
    if os.environ.get("BEFORE"):
        binaries = {"before": os.environ["BEFORE"], **binaries}
    up = free_port()
    mock = subprocess.Popen([os.path.join(REL, "mock-upstream"), "--port", str(up),
                             "--echo", "body"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    apis = tempfile.mkdtemp()
    try:
        wait_port(up)
        with open(os.path.join(apis, "plain.json"), "w") as f:
            json.dump({"name": "plain", "api_id": "plain", "org_id": "o", "active": True,
                       "use_keyless": True,
                       "version_data": {"not_versioned": True,
                                        "versions": {"Default": {"name": "Default"}}},
                       "proxy": {"listen_path": "/plain/", "strip_listen_path": True,
                                 "target_url": f"http://127.0.0.1:{up}"}}, f)
        runs = {name: [] for name in binaries}
        for r in range(args.rounds):
            order = list(binaries) if r % 2 == 0 else list(reversed(binaries))
            for name in order:
                port = free_port()
                gw = subprocess.Popen([binaries[name], "--apis", apis, "--listen",
                                       f"127.0.0.1:{port}", "--threads", "1"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    wait_port(port)
                    g0, m0 = cpu_ns(gw.pid), cpu_ns(mock.pid)
                    status = upload(port, args.chunks)
                    g, m = (cpu_ns(gw.pid) - g0) / 1e9, (cpu_ns(mock.pid) - m0) / 1e9
                finally:
                    gw.terminate()
                    gw.wait()
                runs[name].append((g, m))
                print(f"round {r + 1} {name}: {status}, gateway CPU {g:.2f} s, "
                      f"upstream CPU {m:.2f} s", flush=True)
        print(f"\n{args.chunks:,} one-byte chunks, {args.rounds} round(s):")
        for name, v in runs.items():
            gs, ms = [x[0] for x in v], [x[1] for x in v]
            print(f"  {name}: gateway CPU {statistics.median(gs):.2f} s "
                  f"({min(gs):.2f}-{max(gs):.2f}), upstream CPU "
                  f"{statistics.median(ms):.2f} s ({min(ms):.2f}-{max(ms):.2f})")
    finally:
        mock.terminate()
        mock.wait()


if __name__ == "__main__":
    main()
