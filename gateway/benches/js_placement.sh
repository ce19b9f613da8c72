#!/usr/bin/env bash
# Gateway CPU per request (utime+stime from /proc) of every JS route against
# the native plugin (/gopl/hello/) and no middleware (/plain/hello/), with
# scripts on VM threads (--jsvm-threads 1, the default) and inline on the I/O
# thread (--jsvm-threads 0): what the hand-off costs, and what each engine
# and strategy adds over native. ab -c 10 without keep-alive (the seed's
# load), one worker (--threads 1, so every request crosses the same paths),
# routes alternated within each round. Prints every run, then per route the
# median and min-max over the rounds, and the median's excess over
# /gopl/hello/. Never asserts.
#
# To try this: 1. cargo build --release
# 2. gateway/benches/js_placement.sh  [N=10000 ROUNDS=5 THREADS="1 0"
#    ROUTES="/plain/hello/ /gopl/hello/ /jsvm/hello/ ..."]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release}
N=${N:-10000}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-1 0}
MOCK_PORT=${MOCK_PORT:-18322}
GW_PORT=${GW_PORT:-18391}
ROUTES=${ROUTES:-/plain/hello/ /gopl/hello/ /jsvm/hello/ /jsvm-tykjson/hello/ /jsvm-fresh/hello/ /jsvm-quickjs/hello/ /jsvm-quickjs-tykjson/hello/ /jsvm-quickjs-fresh/hello/}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
mkdir "$work/apis"
for f in apis/jsvm-*.json apis/plain-hello.json apis/gopl-hello.json; do
  sed "s#http://localhost:8222#http://127.0.0.1:$MOCK_PORT#; s#\"js/#\"$PWD/js/#; s#\"target/release/#\"$PWD/$BIN/#" \
    "$f" > "$work/apis/$(basename "$f")"
done
"$BIN/mock-upstream" --listen "127.0.0.1:$MOCK_PORT" >/dev/null 2>&1 &
pids+=($!)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # clock ticks
tick=$(getconf CLK_TCK)
results="$work/results"
for threads in $THREADS; do
  "$BIN/gateway" --apis "$work/apis" --listen "127.0.0.1:$GW_PORT" --threads 1 \
    --jsvm-threads "$threads" >"$work/gw.log" 2>&1 &
  gw=$!
  pids+=("$gw")
  for _ in $(seq 50); do
    curl -sf "http://127.0.0.1:$GW_PORT/hello" >/dev/null 2>&1 && break
    sleep 0.1
  done
  # Warm-up: every route once, so no first-call cost lands in a round.
  for path in $ROUTES; do ab -q -n 500 -c 10 "http://127.0.0.1:$GW_PORT$path" >/dev/null; done
  for r in $(seq "$ROUNDS"); do
    for path in $ROUTES; do
      before=$(cpu "$gw")
      out=$(ab -q -n "$N" -c 10 "http://127.0.0.1:$GW_PORT$path")
      after=$(cpu "$gw")
      rps=$(awk '/Requests per second/ {print $4}' <<<"$out")
      failed=$(awk '/Failed requests/ {print $3}' <<<"$out")
      non2xx=$(awk '/Non-2xx responses/ {print $3}' <<<"$out")
      us=$(awk -v a="$after" -v b="$before" -v n="$N" -v t="$tick" 'BEGIN {printf "%.1f", (a - b) / t * 1e6 / n}')
      echo "jsvm-threads=$threads round=$r $path gateway_cpu_us_per_req=$us req_per_s=$rps failed=$failed non2xx=${non2xx:-0}"
      echo "$threads $path $us" >>"$results"
    done
  done
  kill "$gw"; wait "$gw" 2>/dev/null || true
done
echo
echo "gateway CPU µs per request: median [min-max] over $ROUNDS rounds; +x = median minus /gopl/hello/'s"
for threads in $THREADS; do
  native=$(awk -v t="$threads" '$1 == t && $2 == "/gopl/hello/" {print $3}' "$results" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  for path in $ROUTES; do
    awk -v t="$threads" -v p="$path" '$1 == t && $2 == p {print $3}' "$results" | sort -n |
      awk -v t="$threads" -v p="$path" -v n="${native:-0}" '{a[NR]=$1} END {m=a[int((NR+1)/2)]; printf "jsvm-threads=%s %-30s %7.1f [%s-%s]  %+7.1f\n", t, p, m, a[1], a[NR], m - n}'
  done
done
