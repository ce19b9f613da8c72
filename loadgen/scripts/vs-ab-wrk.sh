#!/usr/bin/env bash
# Max throughput against mock-upstream, alternated in one run:
#   loadgen vs ab   (no keep-alive, -n N -c C)
#   loadgen -k vs wrk (keep-alive, -c C, D seconds)
# Prints every run and the medians. Needs `cargo build --release -p loadgen`,
# ab (apache2-utils) and wrk.
# usage: loadgen/scripts/vs-ab-wrk.sh [ROUNDS=3] [N=20000] [C=10] [D=3]
set -euo pipefail
rounds=${1:-3}; n=${2:-20000}; c=${3:-10}; d=${4:-3}
bin=${BIN_DIR:-target/release}
log=$(mktemp)
"$bin/mock-upstream" --listen 127.0.0.1:0 > "$log" &
mock=$!
trap 'kill $mock 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do grep -q listening "$log" && break; sleep 0.1; done
addr=$(awk '{print $NF}' "$log")
url="http://$addr/hello/"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
declare -A res
for r in $(seq "$rounds"); do
  res[ab]+="$(ab -q -n "$n" -c "$c" "$url" 2>/dev/null | awk '/^Requests per second/ {print $4}') "
  res[loadgen]+="$("$bin/loadgen" -q -n "$n" -c "$c" "$url" | awk '/^Requests per second/ {print $4}') "
  res[wrk]+="$(wrk -c "$c" -t 2 -d "${d}s" "$url" | awk '/^Requests\/sec/ {print $2}') "
  res[loadgen_k]+="$("$bin/loadgen" -q -k -c "$c" -t "$d" "$url" | awk '/^Requests per second/ {print $4}') "
done
for k in ab loadgen wrk loadgen_k; do
  printf '%-10s runs: %s median: %s\n' "$k" "${res[$k]}" "$(echo "${res[$k]}" | tr ' ' '\n' | grep . | median)"
done
