#!/usr/bin/env bash
# CPU per request of every process on ab's workload, ab against loadgen,
# alternated round by round: the load generator itself, mock-upstream and
# the gateway, the same requests through the same gateway route.
#
#   client CPU: bash's `time` (user+sys of the client process, ms resolution)
#   server CPU: the sum over threads of /proc/PID/task/*/schedstat (ns)
#
# Prints one line per run and, per client (and mock), the median with
# min-max of each figure. Run from the repo root after `cargo build
# --release`; needs ab (apt-get install apache2-utils).
# usage: loadgen/scripts/cpu-per-request.sh [ROUNDS=5] [N=10000] [C=10] [ROUTE=/plain/hello/] [KEEPALIVE=]
#   KEEPALIVE=-k measures ab -k against loadgen -k.
# Environment: BIN_DIR (default target/release) holds the three binaries;
#   LOADGEN_BINS several loadgen binaries to compare with ab and each other
#     (before/after), default $BIN_DIR/loadgen;
#   MOCK_BINS several mock-upstream binaries (before/after), each measured
#     in every round (restarted between them), default $BIN_DIR/mock-upstream;
#   MOCK_THREADS their --threads; UPSTREAM_PORT, GATEWAY_PORT, APIS (the
#   route's target_url must be 127.0.0.1:UPSTREAM_PORT or localhost:...).
set -euo pipefail
rounds=${1:-5}; n=${2:-10000}; c=${3:-10}; route=${4:-/plain/hello/}; ka=${5:-}
bin=${BIN_DIR:-target/release}
up_port=${UPSTREAM_PORT:-8222}; gw_port=${GATEWAY_PORT:-8091}
read -r -a loadgens <<< "${LOADGEN_BINS:-$bin/loadgen}"
read -r -a mocks <<< "${MOCK_BINS:-${MOCK_BIN:-$bin/mock-upstream}}"
tmp=$(mktemp -d)
up=; gw=
cleanup() { for p in $up $gw; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

start_mock() {
  [ -n "$up" ] && { kill "$up"; wait "$up" 2>/dev/null || true; }
  "$1" --listen "127.0.0.1:$up_port" ${MOCK_THREADS:+--threads "$MOCK_THREADS"} > "$tmp/up.log" 2>&1 &
  up=$!
  for _ in $(seq 50); do grep -q listening "$tmp/up.log" && return; sleep 0.1; done
  echo "$1 did not start" >&2; exit 1
}
start_mock "${mocks[0]}"
"$bin/gateway" --apis "${APIS:-apis}" --listen "127.0.0.1:$gw_port" > "$tmp/gw.log" 2>&1 &
gw=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$gw_port/hello" > /dev/null && break; sleep 0.1; done
url="http://127.0.0.1:$gw_port$route"
curl -sf "$url" | grep -q "hello from mock upstream" || { echo "$url does not reach mock-upstream" >&2; exit 1; }

# Nanoseconds of CPU the process has used so far, all threads (%.0f: awk's
# %d stops at 2^31 in mawk, about 2 s of CPU).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }

# Runs one client; prints "client_us upstream_us gateway_us req_per_s" per request.
measure() {
  local who=$1; shift
  local u0 g0 u1 g1 out
  ab -q -n 500 -c "$c" $ka "$url" > /dev/null 2>&1 || true
  u0=$(cpu_ns "$up"); g0=$(cpu_ns "$gw")
  out=$( { TIMEFORMAT='%3U %3S'; time "$@" > "$tmp/out" 2>/dev/null; } 2>&1 )
  u1=$(cpu_ns "$up"); g1=$(cpu_ns "$gw")
  local rps failed
  rps=$(awk '/^Requests per second/ {print $4}' "$tmp/out")
  failed=$(awk '/^Failed requests/ {print $3}' "$tmp/out")
  [ "$failed" = "0" ] || { echo "$who: $failed failed requests" >&2; cat "$tmp/out" >&2; exit 1; }
  echo "$out" | awk -v n="$n" -v du=$((u1 - u0)) -v dg=$((g1 - g0)) -v rps="$rps" \
    '{printf "%.1f %.1f %.1f %.0f\n", ($1 + $2) * 1e6 / n, du / 1e3 / n, dg / 1e3 / n, rps}'
}

clients=(ab "${loadgens[@]}")
declare -A rows
keys=()
for r in $(seq "$rounds"); do
  for m in "${mocks[@]}"; do
    [ "${#mocks[@]}" -gt 1 ] && start_mock "$m"
    # Rotate which client goes first.
    k=${#clients[@]}; order=()
    for i in $(seq 0 $((k - 1))); do order+=("${clients[$(( (i + r) % k ))]}"); done
    for who in "${order[@]}"; do
      if [ "$who" = ab ]; then
        line=$(measure ab ab -q -n "$n" -c "$c" $ka "$url")
      else
        line=$(measure "$who" "$who" -q -n "$n" -c "$c" $ka "$url")
      fi
      key=$who; [ "${#mocks[@]}" -gt 1 ] && key="$who @ $m"
      [ -n "${rows[$key]:-}" ] || keys+=("$key")
      echo "round $r $key: client $(echo "$line" | awk '{print $1}') µs/req, mock-upstream $(echo "$line" | awk '{print $2}') µs/req, gateway $(echo "$line" | awk '{print $3}') µs/req, $(echo "$line" | awk '{print $4}') req/s"
      rows[$key]+="$line"$'\n'
    done
  done
done

stat() { # column -> "median (min-max)"
  sort -g | awk '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%.1f (%.1f-%.1f)", m, a[1], a[NR]}'
}
echo
echo "median (min-max) over $rounds rounds, -n $n -c $c $ka $route, load average $(cut -d' ' -f1-3 /proc/loadavg):"
for key in "${keys[@]}"; do
  col() { printf '%s' "${rows[$key]}" | grep . | awk -v k="$1" '{print $k}' | stat; }
  echo "$key: client $(col 1) µs/req; mock-upstream $(col 2) µs/req; gateway $(col 3) µs/req; $(col 4) req/s"
done
