#!/usr/bin/env bash
# CPU per request of every process on ab's workload, ab against loadgen,
# alternated round by round: the load generator itself, mock-upstream and
# the gateway, the same requests through the same gateway route.
#
#   client CPU: bash's `time` (user+sys of the client process, ms resolution)
#   server CPU: the sum over threads of /proc/PID/task/*/schedstat (ns)
#
# Prints one line per run and, per client, the median with min-max of each
# figure. Run from the repo root after `cargo build --release`; needs ab
# (apt-get install apache2-utils).
# usage: loadgen/scripts/cpu-per-request.sh [ROUNDS=5] [N=10000] [C=10] [ROUTE=/plain/hello/] [KEEPALIVE=]
#   KEEPALIVE=-k measures ab -k against loadgen -k.
# Environment: BIN_DIR (default target/release) holds the three binaries;
#   MOCK_BIN another mock-upstream (a before/after comparison of the mock);
#   MOCK_THREADS its --threads; UPSTREAM_PORT, GATEWAY_PORT, APIS.
set -euo pipefail
rounds=${1:-5}; n=${2:-10000}; c=${3:-10}; route=${4:-/plain/hello/}; ka=${5:-}
bin=${BIN_DIR:-target/release}
up_port=${UPSTREAM_PORT:-8222}; gw_port=${GATEWAY_PORT:-8091}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

mock=${MOCK_BIN:-$bin/mock-upstream}
"$mock" --listen "127.0.0.1:$up_port" ${MOCK_THREADS:+--threads "$MOCK_THREADS"} > "$tmp/up.log" 2>&1 &
pids+=($!); up=$!
"$bin/gateway" --apis "${APIS:-apis}" --listen "127.0.0.1:$gw_port" > "$tmp/gw.log" 2>&1 &
pids+=($!); gw=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$gw_port/hello" > /dev/null && break; sleep 0.1; done
url="http://127.0.0.1:$gw_port$route"
curl -sf "$url" | grep -q "hello from mock upstream" || { echo "$url does not reach mock-upstream" >&2; exit 1; }

# Nanoseconds of CPU the process has used so far, all threads.
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d", s}'; }

# Runs one client; prints "client_us upstream_us gateway_us req_per_s" per request.
measure() {
  local who=$1; shift
  local u0 g0 u1 g1 t out
  ab -q -n 500 -c "$c" $ka "$url" > /dev/null 2>&1 || true
  u0=$(cpu_ns "$up"); g0=$(cpu_ns "$gw")
  out=$( { TIMEFORMAT='%3U %3S'; time "$@" > "$tmp/$who.out" 2>/dev/null; } 2>&1 )
  u1=$(cpu_ns "$up"); g1=$(cpu_ns "$gw")
  local rps
  rps=$(awk '/^Requests per second/ {print $4}' "$tmp/$who.out")
  local failed
  failed=$(awk '/^Failed requests/ {print $3}' "$tmp/$who.out")
  [ "$failed" = "0" ] || { echo "$who: $failed failed requests" >&2; cat "$tmp/$who.out" >&2; exit 1; }
  echo "$out" | awk -v n="$n" -v du=$((u1 - u0)) -v dg=$((g1 - g0)) -v rps="$rps" \
    '{printf "%.1f %.1f %.1f %.0f\n", ($1 + $2) * 1e6 / n, du / 1e3 / n, dg / 1e3 / n, rps}'
}

declare -A rows
for r in $(seq "$rounds"); do
  # Alternate which client goes first.
  order="ab loadgen"; [ $((r % 2)) -eq 0 ] && order="loadgen ab"
  for who in $order; do
    if [ "$who" = ab ]; then
      line=$(measure ab ab -q -n "$n" -c "$c" $ka "$url")
    else
      line=$(measure loadgen "$bin/loadgen" -q -n "$n" -c "$c" $ka "$url")
    fi
    echo "round $r $who: client $(echo "$line" | awk '{print $1}') µs/req, mock-upstream $(echo "$line" | awk '{print $2}') µs/req, gateway $(echo "$line" | awk '{print $3}') µs/req, $(echo "$line" | awk '{print $4}') req/s"
    rows[$who]+="$line"$'\n'
  done
done

stat() { # column -> "median (min-max)"
  sort -g | awk '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%.1f (%.1f-%.1f)", m, a[1], a[NR]}'
}
echo
echo "median (min-max) over $rounds rounds, -n $n -c $c $ka $route, load average $(cut -d' ' -f1-3 /proc/loadavg):"
for who in ab loadgen; do
  col() { printf '%s' "${rows[$who]}" | grep . | awk -v k="$1" '{print $k}' | stat; }
  echo "$who: client $(col 1) µs/req; mock-upstream $(col 2) µs/req; gateway $(col 3) µs/req; $(col 4) req/s"
done
