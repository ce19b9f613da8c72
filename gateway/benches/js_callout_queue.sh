#!/usr/bin/env bash
# What happens when several scripts wait on a slow service at once: K
# concurrent requests to a JS API whose script calls TykMakeHttpRequest
# against a service that answers after DELAY seconds, with --threads 1 and
# --jsvm-threads N. Prints each request's status and wall time (curl's
# time_total), and /plain/'s, sent while they wait. A measurement, not a
# test: nothing is asserted.
#
# To try this:
#   1. cargo build -p gateway            (or BIN=target/release after a release build)
#   2. gateway/benches/js_callout_queue.sh            # N=1 K=4 DELAY=1
#   3. JSVM_THREADS=4 gateway/benches/js_callout_queue.sh
#
# Needs python3 and curl. Everything listens on 127.0.0.1, ports chosen by
# the kernel; every process started here is stopped by pid at exit.
set -euo pipefail
BIN=${BIN:-target/debug}
N=${JSVM_THREADS:-1}
K=${REQUESTS:-4}
DELAY=${DELAY:-1}
TIMEOUT=${JSVM_TIMEOUT:-10s}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# The service: /slow answers after DELAY seconds, anything else at once.
python3 - "$DELAY" > "$work/slow.port" <<'PY' &
import sys, time, http.server, socketserver
delay = float(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/slow"): time.sleep(delay)
        self.send_response(200); self.send_header("Content-Length", "4"); self.end_headers()
        self.wfile.write(b"slow")
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
pids+=($!)
for _ in $(seq 50); do [ -s "$work/slow.port" ] && break; sleep 0.1; done
slow=$(cat "$work/slow.port")

mkdir "$work/apis"
cat > "$work/waits.js" <<JS
var waits = new TykJS.TykMiddleware.NewMiddleware({});
waits.NewProcessRequest(function (request, session, spec) {
    var r = TykMakeHttpRequest(JSON.stringify({Method: "GET", Domain: "http://127.0.0.1:$slow", Resource: "/slow"}));
    request.ReturnOverrides.ResponseCode = 200;
    request.ReturnOverrides.ResponseBody = r === undefined ? "no answer" : JSON.parse(r).Body;
    return waits.ReturnData(request, {});
});
JS
api() { # id listen_path middleware-json
    cat > "$work/apis/$1.json" <<J
{"name": "$1", "api_id": "$1", "org_id": "o", "use_keyless": true, "active": true,
 "proxy": {"listen_path": "$2", "target_url": "http://127.0.0.1:$slow", "strip_listen_path": true}$3}
J
}
api waits /waits/ ", \"custom_middleware\": {\"driver\": \"otto\", \"pre\": [{\"name\": \"waits\", \"path\": \"$work/waits.js\"}]}"
api plain /plain/ ""

"$BIN/gateway" --apis "$work/apis" --listen 127.0.0.1:0 --threads 1 \
    --jsvm-threads "$N" --jsvm-timeout "$TIMEOUT" > "$work/gw.out" 2> "$work/gw.err" &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$work/gw.out" 2>/dev/null && break; sleep 0.1; done
gw=$(sed -n 's/^gateway listening on //p' "$work/gw.out")

echo "K=$K concurrent /waits/ requests, service delay ${DELAY}s, --threads 1 --jsvm-threads $N --jsvm-timeout $TIMEOUT"
for i in $(seq "$K"); do
    curl -s -o /dev/null -w "waits[$i] %{http_code} %{time_total}s\n" "http://$gw/waits/" > "$work/res-$i" &
done
sleep 0.2
curl -s -o /dev/null -w "plain (sent while they wait) %{http_code} %{time_total}s\n" "http://$gw/plain/"
wait $(jobs -p | tail -n "$K") 2>/dev/null || true
sleep "$DELAY"
cat "$work"/res-* | sort -t' ' -k3 -n
