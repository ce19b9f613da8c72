#!/usr/bin/env bash
# Gateway CPU per request (utime+stime from /proc) of every JS route against
# the native plugin (/gopl/hello/) and no middleware (/plain/hello/), for
# each placement of scripts (MODES):
#   default  boa on VM threads; QuickJS inline until a call overruns
#          1 ms (--jsvm-inline-budget)
#   threads  as default, QuickJS on VM threads from the start
#          (--jsvm-inline-budget 0)
#   inline scripts on the I/O thread (--jsvm-threads 0: no isolation)
#   unpinned  as default, with --cpu-affinity off: the kernel places the
#          worker and its VM threads (affinity.rs says what that costs)
# One gateway per mode runs for the whole script (--threads 1, so every
# request crosses the same paths); within each round every (mode, route)
# pair is measured once, in a rotated order, so drift lands on all of them.
# ab -c 10 without keep-alive (the seed's load). Prints every run, then per
# mode and route the median and min-max over the rounds, and the median's
# excess over /gopl/hello/ in the same mode. Never asserts.
#
# To try this: 1. cargo build --release
# 2. gateway/benches/js_placement.sh  [N=10000 ROUNDS=5 MODES="default threads inline unpinned"
#    ROUTES="/plain/hello/ /gopl/hello/ /jsvm/hello/ ..." PIN=0 (taskset
#    the gateways to these CPUs) GW_THREADS=1 (the gateways' --threads)]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release}
N=${N:-10000}
ROUNDS=${ROUNDS:-5}
MODES=${MODES:-default threads inline unpinned}
GW_THREADS=${GW_THREADS:-1}
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
flags() {
  case "$1" in
    default) echo "--jsvm-threads 1" ;;
    threads) echo "--jsvm-threads 1 --jsvm-inline-budget 0" ;;
    inline) echo "--jsvm-threads 0" ;;
    unpinned) echo "--jsvm-threads 1 --cpu-affinity off" ;;
    *) echo "unknown mode $1 (default, threads, inline or unpinned)" >&2; exit 2 ;;
  esac
}
declare -A gw port
p=$GW_PORT
for mode in $MODES; do
  # shellcheck disable=SC2046
  ${PIN:+taskset -c "$PIN"} "$BIN/gateway" --apis "$work/apis" --listen "127.0.0.1:$p" --threads "$GW_THREADS" \
    --secret bench $(flags "$mode") >"$work/gw-$mode.log" 2>&1 &
  gw[$mode]=$!
  port[$mode]=$p
  pids+=("$!")
  for _ in $(seq 50); do
    curl -sf "http://127.0.0.1:$p/hello" >/dev/null 2>&1 && break
    sleep 0.1
  done
  # Warm-up: every route once, so no first-call cost lands in a round.
  for path in $ROUTES; do ab -q -n 500 -c 10 "http://127.0.0.1:$p$path" >/dev/null; done
  curl -sf -X DELETE -H "X-Tyk-Authorization: bench" "http://127.0.0.1:$p/tyk/stats" >/dev/null
  p=$((p + 1))
done
pairs=()
for mode in $MODES; do for path in $ROUTES; do pairs+=("$mode $path"); done; done
for r in $(seq "$ROUNDS"); do
  n=${#pairs[@]}
  for k in $(seq 0 $((n - 1))); do
    read -r mode path <<<"${pairs[$(((k + r) % n))]}"
    pid=${gw[$mode]}
    before=$(cpu "$pid")
    out=$(ab -q -n "$N" -c 10 "http://127.0.0.1:${port[$mode]}$path")
    after=$(cpu "$pid")
    rps=$(awk '/Requests per second/ {print $4}' <<<"$out")
    failed=$(awk '/Failed requests/ {print $3}' <<<"$out")
    non2xx=$(awk '/Non-2xx responses/ {print $3}' <<<"$out")
    us=$(awk -v a="$after" -v b="$before" -v n="$N" -v t="$tick" 'BEGIN {printf "%.1f", (a - b) / t * 1e6 / n}')
    echo "mode=$mode round=$r $path gateway_cpu_us_per_req=$us req_per_s=$rps failed=$failed non2xx=${non2xx:-0}"
    echo "$mode $path $us" >>"$results"
  done
done
echo
echo "gateway CPU µs per request: median [min-max] over $ROUNDS rounds; +x = median minus /gopl/hello/'s"
for mode in $MODES; do
  native=$(awk -v t="$mode" '$1 == t && $2 == "/gopl/hello/" {print $3}' "$results" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  for path in $ROUTES; do
    awk -v t="$mode" -v p="$path" '$1 == t && $2 == p {print $3}' "$results" | sort -n |
      awk -v t="$mode" -v p="$path" -v n="${native:-0}" '{a[NR]=$1} END {m=a[int((NR+1)/2)]; printf "%-6s %-30s %7.1f [%s-%s]  %+7.1f\n", t, p, m, a[1], a[NR], m - n}'
  done
done
echo
echo "middleware call time (µs, wall, as /tyk/stats records it over every round)"
for mode in $MODES; do
  curl -sf -H "X-Tyk-Authorization: bench" "http://127.0.0.1:${port[$mode]}/tyk/stats" |
    python3 -c '
import json, sys
mode = sys.argv[1]
for c in json.load(sys.stdin)["apis"]:
    print("{:<6} {:<24} {:<4} mean {:8.2f}  p50 {:8.2f}  p99 {:9.2f}  n {}".format(
        mode, c["api_id"], c["hook"], c["mean_us"], c["p50_us"], c["p99_us"], c["count"]))
' "$mode"
done
