#!/usr/bin/env bash
# What many JS APIs cost a gateway: N copies of the seed's JS API (each its
# own listen path, /js0/ ... /js<N-1>/, on ENGINE), one gateway with
# GW_THREADS workers. Prints the time from start to `gateway listening`, its
# resident memory and threads then, the time of the first request to two of
# the APIs (curl's time_total, on fresh connections, so a worker may build
# the API's context for it), and memory, threads and the gateway's CPU
# seconds after those requests. The measurement behind the README's "Scale"
# paragraph; it never asserts.
#
# To try this: 1. cargo build --release
# 2. gateway/benches/many_js_apis.sh  [N=2000 ENGINE=boa (or quickjs)
#    GW_THREADS=2 BIN=target/release]  (or GATEWAY_BIN=<another build>)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release}
GATEWAY_BIN=${GATEWAY_BIN:-$BIN/gateway}
N=${N:-2000}
ENGINE=${ENGINE:-boa}
GW_THREADS=${GW_THREADS:-2}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
mkdir "$work/apis"

"$BIN/mock-upstream" --listen 127.0.0.1:0 >"$work/mock.out" 2>/dev/null &
pids+=($!)
until grep -qo '127.0.0.1:[0-9]*' "$work/mock.out" 2>/dev/null; do sleep 0.05; done
mock=$(grep -o '127.0.0.1:[0-9]*' "$work/mock.out" | head -1)

python3 - "$work/apis" "$N" "$ENGINE" "$mock" "$PWD/js/jsvm_hello.js" <<'EOF'
import json, sys
out, n, engine, mock, script = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
for i in range(n):
    d = {
        "name": f"JS {i}", "api_id": f"js{i}", "org_id": "default",
        "active": True, "use_keyless": True,
        "proxy": {"listen_path": f"/js{i}/", "target_url": f"http://{mock}",
                  "strip_listen_path": True},
        "custom_middleware": {"driver": "otto", "engine": engine,
                              "pre": [{"name": "jsvmHelloPreHook", "path": script}]},
    }
    with open(f"{out}/js{i}.json", "w") as f:
        json.dump(d, f)
EOF

status() { # VmRSS and thread count of pid $1
    awk '/^VmRSS/ {rss=$2} /^Threads/ {t=$2} END {printf "VmRSS %d MiB, %d threads", rss/1024, t}' "/proc/$1/status"
}

start=$(date +%s.%N)
"$GATEWAY_BIN" --apis "$work/apis" --listen 127.0.0.1:0 --threads "$GW_THREADS" \
    >"$work/gw.out" 2>"$work/gw.err" &
gw=$!
pids+=($gw)
until grep -q 'listening' "$work/gw.out" 2>/dev/null; do
    kill -0 "$gw" 2>/dev/null || { tail -5 "$work/gw.err"; exit 1; }
    sleep 0.02
done
up=$(date +%s.%N)
addr=$(grep -o '127.0.0.1:[0-9]*' "$work/gw.out" | head -1)
echo "$N $ENGINE APIs, --threads $GW_THREADS, $("$GATEWAY_BIN" --version 2>/dev/null || echo gateway)"
echo "listening after $(python3 -c "print(f'{$up - $start:.2f}')") s: $(status "$gw")"
last=$((N - 1))
for path in "/js$last/hello" "/js$last/hello" "/js0/hello" "/js0/hello"; do
    curl -s -o /dev/null -w "GET $path: %{http_code} in %{time_total} s\n" "http://$addr$path"
done
cpu=$(awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$gw/stat")
echo "after those: $(status "$gw"), gateway CPU $cpu s"
