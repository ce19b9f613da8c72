#!/usr/bin/env bash
# What the upstream's side of one proxied request costs, for mock-upstream
# against a floor and a real server in the same spot: the same gateway
# route in front of (1) mock-upstream, (2) floor-upstream.c (one epoll
# thread, one recv and one send per request: the kernel's cost plus almost
# nothing) and (3) nginx `return 200` with one process, when installed.
# Rounds rotate the order; per run, the upstream's CPU time (all threads,
# /proc/PID/task/*/schedstat) over the requests of `ab -n N -c C` through
# the gateway (a new client connection per request; the gateway's pooled
# upstream connections are kept alive, as in `loadgen bench`).
#
# Run from the repo root after `cargo build --release`; needs ab
# (apache2-utils) and a C compiler; nginx (nginx-light) is optional.
# usage: loadgen/scripts/upstream-floor.sh [ROUNDS=5] [N=10000] [C=10]
# Environment: BIN_DIR (default target/release).
set -euo pipefail
rounds=${1:-5}; n=${2:-10000}; c=${3:-10}
bin=${BIN_DIR:-target/release}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.05; done; echo "nothing listens on $1" >&2; exit 1; }
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }

cc -O2 -o "$tmp/floor-upstream" "$(dirname "$0")/floor-upstream.c"
names=(); declare -A upid gwport

# start NAME PORT CMD...: an upstream, and a gateway whose /plain/ route points at it.
start() {
  local name=$1 port=$2; shift 2
  "$@" > "$tmp/$name.log" 2>&1 &
  upid[$name]=$!; pids+=($!)
  wait_port "$port"
  mkdir -p "$tmp/apis-$name"
  python3 - "$port" "$tmp/apis-$name/plain.json" <<'PY'
import json, sys
a = json.load(open("apis/plain-hello.json"))
a["proxy"]["target_url"] = f"http://127.0.0.1:{sys.argv[1]}"
json.dump(a, open(sys.argv[2], "w"))
PY
  gwport[$name]=$(free_port)
  "$bin/gateway" --apis "$tmp/apis-$name" --listen "127.0.0.1:${gwport[$name]}" > "$tmp/gw-$name.log" 2>&1 &
  pids+=($!)
  wait_port "${gwport[$name]}"
  names+=("$name")
}

p=$(free_port); start mock-upstream "$p" "$bin/mock-upstream" --listen "127.0.0.1:$p"
p=$(free_port); start floor "$p" "$tmp/floor-upstream" "$p"
if command -v nginx > /dev/null || [ -x /usr/sbin/nginx ]; then
  p=$(free_port)
  body=$(curl -sf "http://127.0.0.1:${gwport[mock-upstream]}/plain/hello/" -H 'User-Agent: ApacheBench/2.3')
  cat > "$tmp/nginx.conf" <<NGX
daemon off;
master_process off;
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$p;
    location / { default_type application/json; return 200 '$body'; }
  }
}
NGX
  start nginx "$p" "$(command -v nginx || echo /usr/sbin/nginx)" -c "$tmp/nginx.conf" -e "$tmp/nginx-error.log"
fi

declare -A rows
for r in $(seq "$rounds"); do
  k=${#names[@]}
  for i in $(seq 0 $((k - 1))); do
    name=${names[$(( (i + r) % k ))]}
    url="http://127.0.0.1:${gwport[$name]}/plain/hello/"
    ab -q -n 500 -c "$c" "$url" > /dev/null
    u0=$(cpu_ns "${upid[$name]}")
    ab -q -n "$n" -c "$c" "$url" > "$tmp/ab.out"
    u1=$(cpu_ns "${upid[$name]}")
    failed=$(awk '/^Failed requests/ {print $3}' "$tmp/ab.out")
    [ "$failed" = 0 ] || { echo "$name: $failed failed requests" >&2; cat "$tmp/ab.out" >&2; exit 1; }
    us=$(awk -v d=$((u1 - u0)) -v n="$n" 'BEGIN {printf "%.2f", d / 1e3 / n}')
    echo "round $r $name: $us µs of upstream CPU per request"
    rows[$name]+="$us"$'\n'
  done
done

echo
echo "upstream CPU per proxied request, median (min-max) of $rounds rotated rounds, ab -n $n -c $c, load average $(cut -d' ' -f1-3 /proc/loadavg):"
for name in "${names[@]}"; do
  printf '%s' "${rows[$name]}" | grep . | sort -g | awk -v k="$name" '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "  %-14s %.2f (%.2f-%.2f) µs\n", k, m, a[1], a[NR]}'
done
