#!/usr/bin/env bash
# Native plugin overhead, as issue 3 asks: `ab -n N -c 10` on /gopl/hello/
# (AddHeader), /plain/hello/ (no middleware) and /noop/hello/ (a native call
# that does nothing), alternated ROUNDS times in one run, then the medians and
# the recorded call-time histogram from GET /tyk/stats.
#
# A benchmark, not a test: the machine is shared and noisy, so read ratios of
# medians, never single runs. Bounded: ROUNDS x 3 x N requests, each ab run
# under a 120 s timeout; the servers it starts are stopped by pid on exit.
#
# To try this: 1. cargo build --release -p gateway -p loadgen -p add-header -p test-plugins
# 2. plugins/bench-native.sh   (MOCK_PORT, GW_PORT, ROUNDS, N override)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MOCK_PORT=${MOCK_PORT:-18431}
GW_PORT=${GW_PORT:-18432}
ROUNDS=${ROUNDS:-5}
N=${N:-10000}
REL=$ROOT/target/release
DIR=$(mktemp -d)
trap 'kill $GW $MOCK 2>/dev/null; wait $GW $MOCK 2>/dev/null; rm -rf "$DIR"' EXIT

api() { # api_id listen_path custom_middleware-json
  cat >"$DIR/$1.json" <<JSON
{"api_id": "$1", "name": "$1", "org_id": "default", "active": true, "use_keyless": true,
 "proxy": {"listen_path": "$2", "target_url": "http://127.0.0.1:$MOCK_PORT", "strip_listen_path": true},
 "custom_middleware": $3}
JSON
}
api gopl-hello /gopl/ "{\"driver\": \"goplugin\", \"pre\": [{\"name\": \"AddHeader\", \"path\": \"$REL/libadd_header.so\"}]}"
api noop-hello /noop/ "{\"driver\": \"goplugin\", \"pre\": [{\"name\": \"Noop\", \"path\": \"$REL/libtest_plugins.so\"}]}"
api plain-hello /plain/ "{}"

"$REL/mock-upstream" --port "$MOCK_PORT" >"$DIR/mock.log" 2>&1 & MOCK=$!
"$REL/gateway" --apis "$DIR" --listen "127.0.0.1:$GW_PORT" --secret bench >"$DIR/gw.log" 2>&1 & GW=$!
for _ in $(seq 50); do curl -sf "localhost:$GW_PORT/hello" >/dev/null && break; sleep 0.1; done
curl -sf -X DELETE -H 'X-Tyk-Authorization: bench' "localhost:$GW_PORT/tyk/stats" >/dev/null

cpu_ns() { cat /proc/$GW/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; }
routes=(gopl plain noop)
for round in $(seq "$ROUNDS"); do
  # Rotate the order each round, so no route always runs right after another
  # (10000 closed connections per run leave TIME_WAIT sockets behind).
  for i in 0 1 2; do
    route=${routes[$(( (round + i) % 3 ))]}
    before=$(cpu_ns)
    rps=$(timeout 120 ab -q -n "$N" -c 10 "http://127.0.0.1:$GW_PORT/$route/hello/" |
      awk '/Failed requests/ && $3 != 0 {print "FAILED " $3 > "/dev/stderr"} /Requests per second/ {print $4}')
    cpu=$(( ($(cpu_ns) - before) / N ))
    echo "$round $route $rps req/s $cpu ns-cpu/req" | tee -a "$DIR/rps"
  done
done
median() { grep " $1 " "$DIR/rps" | awk -v f="$2" '{print $f}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
g=$(median gopl 3); p=$(median plain 3); n=$(median noop 3)
echo "median req/s: gopl $g  plain $p  noop $n  gopl/plain $(awk "BEGIN {printf \"%.3f\", $g/$p}")"
g=$(median gopl 5); p=$(median plain 5); n=$(median noop 5)
echo "median gateway CPU ns/request: gopl $g  plain $p  noop $n  plain/gopl $(awk "BEGIN {printf \"%.3f\", $p/$g}")"
curl -sf -H 'X-Tyk-Authorization: bench' "localhost:$GW_PORT/tyk/stats"; echo
