#!/usr/bin/env bash
# What `_` costs a context: the middleware call p50 (GET /tyk/stats) of
# three `fresh` APIs (a new context per request, so every call pays its
# context's setup): the seed's script, the same plus one `_.keys` call
# (underscore evaluated in every request's context), and a persistent API
# using `_` (evaluated once). Alternated ROUNDS times. A measurement, not a
# test: nothing is asserted.
#
# To try this:
#   1. cargo build -p gateway -p loadgen      (BIN=target/release after a release build)
#   2. gateway/benches/js_underscore_fresh.sh
#   3. HELLO_STRATEGY=persistent GATEWAY=/other/build/gateway gateway/benches/js_underscore_fresh.sh  # A/B another build
#
# Everything listens on 127.0.0.1 (ports from the kernel); every process
# started here is stopped by pid at exit.
set -euo pipefail
BIN=${BIN:-target/debug}
GATEWAY=${GATEWAY:-$BIN/gateway}
N=${N:-500}
ROUNDS=${ROUNDS:-3}
ENGINE=${ENGINE:-boa}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

up=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN/mock-upstream" --listen "127.0.0.1:$up" --threads 1 > /dev/null 2>&1 &
pids+=($!)
mkdir "$work/apis"
script() { # name body-of-handler
    cat > "$work/$1.js" <<JS
var $1 = new TykJS.TykMiddleware.NewMiddleware({});
$1.NewProcessRequest(function (request, session) {
    $2
    request.SetHeaders["X-Custom-JSVM"] = "hello-from-jsvm";
    return $1.ReturnData(request, {});
});
JS
}
api() { # name strategy
    cat > "$work/apis/$1.json" <<J
{"name": "$1", "api_id": "$1", "org_id": "o", "use_keyless": true, "active": true,
 "proxy": {"listen_path": "/$1/", "target_url": "http://127.0.0.1:$up", "strip_listen_path": true},
 "custom_middleware": {"driver": "otto", "engine": "$ENGINE", "strategy": "$2", "pre": [{"name": "$1", "path": "$work/$1.js"}]}}
J
}
script hello ""
script under 'request.SetHeaders["X-Keys"] = _.keys({a: 1}).join();'
script kept 'request.SetHeaders["X-Keys"] = _.keys({a: 1}).join();'
api hello "${HELLO_STRATEGY:-fresh}"; api under fresh; api kept persistent

"$GATEWAY" --apis "$work/apis" --listen 127.0.0.1:0 --threads 1 --secret s > "$work/gw.out" 2> "$work/gw.err" &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$work/gw.out" 2>/dev/null && break; sleep 0.1; done
gw=$(sed -n 's/^gateway listening on //p' "$work/gw.out")

echo "middleware call p50 (µs), $N keep-alive requests per route and round, engine $ENGINE, $GATEWAY"
for r in $(seq "$ROUNDS"); do
    line="round $r:"
    for route in hello under kept; do
        curl -s -X DELETE -H 'X-Tyk-Authorization: s' "http://$gw/tyk/stats" > /dev/null
        "$BIN/loadgen" -k -n "$N" -c 1 "http://$gw/$route/hello/" > /dev/null
        p50=$(curl -s -H 'X-Tyk-Authorization: s' "http://$gw/tyk/stats" |
            python3 -c 'import json,sys; print(" ".join("%.1f" % a["p50_us"] for a in json.load(sys.stdin)["apis"]))')
        line="$line $route=$p50"
    done
    echo "$line"
done
