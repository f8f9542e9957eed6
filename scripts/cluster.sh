#!/usr/bin/env bash
# Starts a scale-out Tangram deployment on loopback and keeps it up until Ctrl-C (or SIGTERM):
#
#   client ──► HAProxy :PORT ──(consistent hash of X-Session-Id)──► tangram serve  replica 1..N
#                                                                         │  │
#                                        Redis :REDIS_PORT ◄──────────────┘  └─ shared session tier
#
# Every replica writes each session's compressed KV to Redis after every turn (--kv-redis), so
# when a replica dies HAProxy sends its conversations to another, which restores them from
# Redis: nothing is lost but the turn in flight. Clients name their conversation with the
# X-Session-Id header (the load balancer hashes it; requests without one go round robin).
#
#   scripts/cluster.sh -m model.gguf [--replicas 2] [--port 8080] [--dir DIR] [-- serve flags...]
#
# Writes DIR/haproxy.cfg, DIR/*.log and DIR/*.pid (one per process: redis, haproxy, replica-K),
# prints "cluster ready: http://127.0.0.1:PORT" when the load balancer answers, and stops every
# process it started on exit. Needs redis-server and haproxy: scripts/setup.sh --cluster.
set -euo pipefail

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/release/tangram"
model=""
replicas=2
port=8080
redis_port=0
replica_base=0
dir=""
serve_args=()
while (($#)); do
  case "$1" in
    -m|--model) model="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --redis-port) redis_port="$2"; shift 2 ;;
    --replica-port) replica_base="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; serve_args=("$@"); break ;;
    *) echo "cluster: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "cluster: $*" >&2; exit 1; }
[ -n "$model" ] || die "give the model: -m model.gguf"
[ -f "$model" ] || die "model '$model' not found"
[ -x "$bin" ] || die "$bin not built: cmake --preset release && cmake --build --preset release --target tangram"
command -v redis-server >/dev/null || die "redis-server missing: scripts/setup.sh --cluster"
command -v haproxy >/dev/null || die "haproxy missing: scripts/setup.sh --cluster"
[[ "$replicas" =~ ^[1-9][0-9]*$ ]] || die "--replicas must be a positive number"

# A port that is free now, for everything not given.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
[ "$redis_port" != 0 ] || redis_port="$(free_port)"
[ -n "$dir" ] || dir="$(mktemp -d /tmp/tangram-cluster.XXXXXX)"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

pids=()
stop_all() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -f "$dir"/*.pid
  echo "cluster: stopped (logs in $dir)" >&2
}
trap stop_all EXIT
trap 'exit 0' INT TERM

wait_http() {  # url seconds
  for _ in $(seq 1 $(($2 * 10))); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# Redis: the shared tier. Append-only file so sessions survive a Redis restart too; bounded,
# least recently used sessions out first.
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes \
  --maxmemory "${TANGRAM_REDIS_MAXMEMORY:-2gb}" --maxmemory-policy allkeys-lru \
  --logfile "$dir/redis.log" &
pids+=($!)
echo $! >"$dir/redis.pid"
for _ in $(seq 1 50); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
redis-cli -p "$redis_port" ping >/dev/null 2>&1 || die "Redis did not start; see $dir/redis.log"

servers=""
for k in $(seq 1 "$replicas"); do
  if [ "$replica_base" != 0 ]; then rport=$((replica_base + k - 1)); else rport="$(free_port)"; fi
  "$bin" serve -m "$model" --port "$rport" --kv-redis "127.0.0.1:$redis_port" "${serve_args[@]}" \
    >"$dir/replica-$k.log" 2>&1 &
  pids+=($!)
  echo $! >"$dir/replica-$k.pid"
  echo "$rport" >"$dir/replica-$k.port"
  servers+="    server replica-$k 127.0.0.1:$rport check"$'\n'
done
for k in $(seq 1 "$replicas"); do
  wait_http "http://127.0.0.1:$(cat "$dir/replica-$k.port")/ready" 300 || die "replica $k did not start; see $dir/replica-$k.log"
done

# HAProxy: consistent hashing on the session id, so a conversation stays on one replica while it
# is up; health checks take a dead replica out within about 2 s, and a request that could not
# connect is retried on another replica (it never reached the dead one).
cat >"$dir/haproxy.cfg" <<EOF
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 10m
    timeout server 10m
    timeout http-keep-alive 10s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response
frontend tangram
    bind 127.0.0.1:$port
    default_backend replicas
backend replicas
    balance hdr(X-Session-Id)
    hash-type consistent
    option httpchk GET /health
    http-check expect status 200
    default-server inter 500ms fall 2 rise 2
$servers
EOF
haproxy -f "$dir/haproxy.cfg" -db >"$dir/haproxy.log" 2>&1 &
pids+=($!)
echo $! >"$dir/haproxy.pid"
wait_http "http://127.0.0.1:$port/health" 20 || die "HAProxy did not start; see $dir/haproxy.log"

echo "cluster ready: http://127.0.0.1:$port ($replicas replicas, Redis 127.0.0.1:$redis_port, state in $dir)"
# Runs until a signal; a replica that dies is left dead (HAProxy routes around it).
while true; do sleep 1; done
