#!/usr/bin/env bash
# What running scripts on VM threads costs, per request, against running
# them inline on the I/O thread: gateway CPU (utime+stime from /proc) per
# request on /jsvm/hello/ and /plain/hello/, ab -c 10 without keep-alive
# (the seed's load), alternated, for --jsvm-threads 1 and 0. Prints, never
# asserts.
#
# To try this: 1. cargo build --release (or pass BIN=target/debug)
# 2. gateway/benches/js_placement.sh  [N=10000 ROUNDS=3 STRATEGY=persistent]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release}
N=${N:-10000}
ROUNDS=${ROUNDS:-3}
MOCK_PORT=${MOCK_PORT:-18322}
GW_PORT=${GW_PORT:-18391}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/apis"
for f in apis/jsvm-hello.json apis/plain-hello.json apis/jsvm-fresh.json; do
  sed "s#http://localhost:8222#http://127.0.0.1:$MOCK_PORT#; s#\"js/#\"$PWD/js/#" "$f" > "$work/apis/$(basename "$f")"
done
"$BIN/mock-upstream" --listen "127.0.0.1:$MOCK_PORT" >/dev/null 2>&1 &
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # clock ticks
tick=$(getconf CLK_TCK)
for threads in 1 0; do
  "$BIN/gateway" --apis "$work/apis" --listen "127.0.0.1:$GW_PORT" \
    --jsvm-threads "$threads" --jsvm-strategy "${STRATEGY:-persistent}" >/dev/null 2>&1 &
  gw=$!
  sleep 1
  for path in /plain/hello/ /jsvm/hello/; do ab -q -n 500 -c 10 "http://127.0.0.1:$GW_PORT$path" >/dev/null; done
  for r in $(seq "$ROUNDS"); do
    for path in /plain/hello/ /jsvm/hello/ ${ROUTES:-}; do
      before=$(cpu $gw)
      rps=$(ab -q -n "$N" -c 10 "http://127.0.0.1:$GW_PORT$path" | awk '/Requests per second/ {print $4}')
      after=$(cpu $gw)
      us=$(awk -v a="$after" -v b="$before" -v n="$N" -v t="$tick" 'BEGIN {printf "%.1f", (a - b) / t * 1e6 / n}')
      echo "jsvm-threads=$threads round=$r $path gateway_cpu_us_per_req=$us req_per_s=$rps"
    done
  done
  kill $gw; wait $gw 2>/dev/null || true
done
