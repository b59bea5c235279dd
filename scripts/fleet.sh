#!/bin/sh
# make fleet: a fleet of tokentriage on one machine. One redis-server and
# three `tokentriage dev` replicas, each with its own gateway, accountant
# and data directory; replica 0 owns the runtime plane (keys, nodes,
# overrides) and replicas 1 and 2 mirror it with --control. Ctrl-C stops
# them all (each flushes its ledger).
#
#   replica   gateway                 accountant              data
#   0 owner   http://127.0.0.1:8790   http://127.0.0.1:8791   .tt-data/fleet/r0
#   1 mirror  http://127.0.0.1:8792   http://127.0.0.1:8793   .tt-data/fleet/r1
#   2 mirror  http://127.0.0.1:8794   http://127.0.0.1:8795   .tt-data/fleet/r2
#   redis     127.0.0.1:6390 (data in .tt-data/fleet/redis)
#
# Environment: CONFIG (examples/fleet.yaml), CLI (bin/tokentriage), WASM
# (build/filter.wasm), DATA (.tt-data/fleet), REDIS_PORT (6390),
# TT_ADMIN_TOKEN and TT_ACCOUNTANT_TOKEN (generated when unset; every
# replica shares them).
set -eu

CONFIG=${CONFIG:-examples/fleet.yaml}
CLI=${CLI:-bin/tokentriage}
WASM=${WASM:-build/filter.wasm}
DATA=${DATA:-.tt-data/fleet}
REDIS_PORT=${REDIS_PORT:-6390}

command -v redis-server >/dev/null 2>&1 || {
	echo "make fleet: redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)" >&2
	exit 1
}
token() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
TT_ADMIN_TOKEN=${TT_ADMIN_TOKEN:-$(token)}
TT_ACCOUNTANT_TOKEN=${TT_ACCOUNTANT_TOKEN:-$(token)}
export TT_ADMIN_TOKEN TT_ACCOUNTANT_TOKEN

mkdir -p "$DATA/redis"
DATA=$(cd "$DATA" && pwd) # redis-server runs in its --dir
pids=""
stop() {
	trap - INT TERM EXIT
	echo
	echo "make fleet: stopping the replicas (each flushes its ledger) and redis-server"
	# shellcheck disable=SC2086
	[ -n "$pids" ] && kill $pids 2>/dev/null
	wait
	exit 0
}
trap stop INT TERM EXIT

redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$DATA/redis" --save 60 1 \
	--logfile "$DATA/redis.log" --daemonize no &
redis=$!
pids="$pids $redis"
until grep -q "Ready to accept connections" "$DATA/redis.log" 2>/dev/null; do
	if ! kill -0 "$redis" 2>/dev/null; then
		echo "make fleet: redis-server did not start (is port $REDIS_PORT taken? REDIS_PORT=N picks another):" >&2
		tail -5 "$DATA/redis.log" >&2
		exit 1
	fi
	sleep 0.1
done

# ready LOG: wait until the replica logging to LOG printed its banner (or
# exited).
ready() {
	while ! grep -q "^Ctrl-C stops it" "$1" 2>/dev/null; do
		if ! kill -0 "$2" 2>/dev/null; then
			echo "make fleet: the replica logging to $1 stopped:" >&2
			tail -20 "$1" >&2
			exit 1
		fi
		sleep 0.2
	done
}

replica() { # N GATEWAY-PORT ACCOUNTANT-PORT [--control URL]
	n=$1 gw=$2 acct=$3
	shift 3
	"$CLI" dev -c "$CONFIG" --wasm "$WASM" \
		--listen "127.0.0.1:$gw" --accountant-listen "127.0.0.1:$acct" \
		--data "$DATA/r$n" --redis "127.0.0.1:$REDIS_PORT" "$@" >"$DATA/r$n.log" 2>&1 &
	pid=$!
	pids="$pids $pid"
	eval "pid$n=$pid"
}

replica 0 8790 8791
ready "$DATA/r0.log" "$pid0"
replica 1 8792 8793 --control http://127.0.0.1:8791
replica 2 8794 8795 --control http://127.0.0.1:8791
ready "$DATA/r1.log" "$pid1"
ready "$DATA/r2.log" "$pid2"

KEY=$(sed -n 's/^  export TT_KEY=//p' "$DATA/r0.log" | tail -1)
cat <<EOT
make fleet: three replicas and one redis-server are serving.

  replica 0 (owner)   gateway http://127.0.0.1:8790   accountant http://127.0.0.1:8791   log $DATA/r0.log
  replica 1 (mirror)  gateway http://127.0.0.1:8792   accountant http://127.0.0.1:8793   log $DATA/r1.log
  replica 2 (mirror)  gateway http://127.0.0.1:8794   accountant http://127.0.0.1:8795   log $DATA/r2.log
  redis-server        127.0.0.1:$REDIS_PORT                                          log $DATA/redis.log

  export TT_ADMIN_TOKEN=$TT_ADMIN_TOKEN
  export TT_KEY=$KEY    # replica 0's demo key, for org:acme/team:ml/user:dev1

Spread requests over the replicas: user_rpm (store: redis) admits 6 a
minute for the whole fleet, so the 7th of these is a 429 whichever replica
it reaches:

  for p in 8790 8792 8794 8790 8792 8794 8790; do curl -s -o /dev/null -w '%{http_code}\\n' \\
    http://127.0.0.1:\$p/v1/chat/completions -H "Authorization: Bearer \$TT_KEY" \\
    -H 'Content-Type: application/json' \\
    -d '{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'; done

Keys are minted on the owner (or through any replica, which forwards):

  bin/tokentriage keys mint --owner org:acme/team:ml/user:dev2 --accountant http://127.0.0.1:8791

Ctrl-C stops them all.
EOT
wait
