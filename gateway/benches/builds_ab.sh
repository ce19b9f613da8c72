#!/usr/bin/env bash
# Two gateway builds, A and B, alternated on the same routes: for each
# round and build a fresh gateway, a warm-up, then `loadgen -n N -c C` per
# route, reading the gateway's CPU (utime+stime from /proc) and its
# context switches (voluntary + involuntary, summed over its threads)
# before and after. Prints one line per run, then per build and route the
# median and min-max over the rounds. A measurement, not a test: nothing
# is asserted.
#
# Session 42 measured the VM-thread queue with it: A = the build before
# (each call held its thread until the answer), B = the queue; boa's
# /jsvm/ at -c 10 -k made 2.4-2.6 context switches a request against
# 1.6-1.9, and cost 48-55 µs of gateway CPU against 37-40.
#
# To try this:
#   1. build both, e.g. `git worktree add /tmp/a <rev> && (cd /tmp/a &&
#      cargo build --release -p gateway)`, and `cargo build --release`
#   2. A=/tmp/a/target/release/gateway B=target/release/gateway \
#      gateway/benches/builds_ab.sh
#      [ROUTES="/jsvm/hello/ /jsvm-inline/hello/ /gopl/hello/" ROUNDS=3
#       N=20000 C=10 KEEPALIVE=1 GW_ARGS="--threads 2"]
#
# Everything listens on 127.0.0.1, ports chosen by the kernel (the
# gateway's `--listen 127.0.0.1:0` prints its address); every process
# started here is stopped by pid at exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release}
A=${A:?A=path of the first gateway binary}
B=${B:?B=path of the second gateway binary}
ROUTES=${ROUTES:-/jsvm/hello/ /jsvm-inline/hello/ /gopl/hello/}
ROUNDS=${ROUNDS:-3}
N=${N:-20000}
C=${C:-10}
KEEPALIVE=${KEEPALIVE:-1}
GW_ARGS=${GW_ARGS:-}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# The address a server started with --listen 127.0.0.1:0 prints in FILE,
# waited for (5 s at most); empty if it never comes.
address_in() {
  local addr=""
  for _ in $(seq 100); do
    addr=$(grep -o '127\.0\.0\.1:[0-9]*' "$1" | head -1 || true)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  echo "$addr"
}

# mock-upstream on a port of the kernel's choosing.
"$BIN/mock-upstream" --listen 127.0.0.1:0 >"$work/mock.out" 2>&1 &
pids+=($!)
up=$(address_in "$work/mock.out")
[ -n "$up" ] || { echo "mock-upstream did not say its address" >&2; cat "$work/mock.out" >&2; exit 1; }
mkdir "$work/apis"
for f in apis/*.json; do
  sed "s#http://localhost:8222#http://$up#; s#\"js/#\"$PWD/js/#; s#\"target/release/#\"$PWD/$BIN/#" \
    "$f" > "$work/apis/$(basename "$f")"
done

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # clock ticks
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
tick=$(getconf CLK_TCK)
k=()
[ "$KEEPALIVE" = 1 ] && k=(-k)
results="$work/results"
for round in $(seq "$ROUNDS"); do
  for build in A B; do
    bin=${!build}
    # shellcheck disable=SC2086
    "$bin" --apis "$work/apis" --listen 127.0.0.1:0 $GW_ARGS >"$work/gw.out" 2>"$work/gw.err" &
    gw=$!
    pids+=("$gw")
    addr=$(address_in "$work/gw.out")
    [ -n "$addr" ] || { echo "gateway $build did not start" >&2; cat "$work/gw.err" >&2; exit 1; }
    for path in $ROUTES; do
      "$BIN/loadgen" -n 2000 -c "$C" "${k[@]}" "http://$addr$path" >/dev/null
    done
    for path in $ROUTES; do
      c0=$(cpu "$gw"); s0=$(switches "$gw")
      out=$("$BIN/loadgen" -n "$N" -c "$C" "${k[@]}" "http://$addr$path")
      c1=$(cpu "$gw"); s1=$(switches "$gw")
      failed=$(awk '/^Failed requests/ {print $3}' <<<"$out")
      mean=$(awk '/^Time per request:.*\(mean\)$/ {print $4}' <<<"$out")
      awk -v b="$build" -v r="$round" -v p="$path" -v c0="$c0" -v c1="$c1" -v s0="$s0" -v s1="$s1" \
          -v n="$N" -v t="$tick" -v f="$failed" -v m="$mean" 'BEGIN {
        printf "build=%s round=%s %s cpu_us=%.1f switches=%.2f mean_ms=%s failed=%s\n",
          b, r, p, (c1 - c0) * 1e6 / t / n, (s1 - s0) / n, m, f }' | tee -a "$results"
    done
    kill "$gw"; wait "$gw" 2>/dev/null || true
  done
done

echo
echo "median [min-max] over $ROUNDS rounds: gateway CPU µs per request, context switches per request"
# The median (the lower middle for an even count) and the range of one
# field's sorted values.
spread() { sort -n | awk '{ v[NR] = $1 } END { printf "%.2f [%.2f-%.2f]", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
for build in A B; do
  for path in $ROUTES; do
    rows=$(grep "^build=$build .* $path " "$results")
    cpus=$(sed 's/.*cpu_us=\([0-9.]*\).*/\1/' <<<"$rows" | spread)
    sws=$(sed 's/.*switches=\([0-9.]*\).*/\1/' <<<"$rows" | spread)
    printf "%s %-28s cpu %s   switches %s\n" "$build" "$path" "$cpus" "$sws"
  done
done
