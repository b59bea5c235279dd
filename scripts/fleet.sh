#!/bin/sh
# make fleet: a fleet of tokentriage on one machine. One redis-server and
# three `tokentriage dev` replicas, each with its own gateway, accountant
# and data directory; replica 0 owns the runtime plane (keys, nodes,
# overrides) and the others mirror it with --control. Ctrl-C stops them
# all (each flushes its ledger).
#
#   replica   gateway                     accountant                  data
#   0 owner   http://127.0.0.1:PORT       http://127.0.0.1:PORT+1     .tt-data/fleet/r0
#   1 mirror  http://127.0.0.1:PORT+2     http://127.0.0.1:PORT+3     .tt-data/fleet/r1
#   2 mirror  http://127.0.0.1:PORT+4     http://127.0.0.1:PORT+5     .tt-data/fleet/r2
#   redis     127.0.0.1:REDIS_PORT (data in .tt-data/fleet/redis)
#
# (a PORT other than 8790 keeps its data in .tt-data/fleet-PORT)
#
# Environment: PORT (8790: replica n's gateway is PORT+2n, its accountant
# PORT+2n+1), REPLICAS (3, from 1 to 9), REDIS_PORT (6390), CONFIG
# (examples/fleet.yaml), CLI (bin/tokentriage), WASM (build/filter.wasm),
# DATA (.tt-data/fleet), TT_ADMIN_TOKEN and TT_ACCOUNTANT_TOKEN (generated
# when unset; every replica shares them). `make fleet PORT=9300
# REDIS_PORT=9390` runs a second fleet beside the first.
set -eu

CONFIG=${CONFIG:-examples/fleet.yaml}
CLI=${CLI:-bin/tokentriage}
WASM=${WASM:-build/filter.wasm}
REDIS_PORT=${REDIS_PORT:-6390}
PORT=${PORT:-8790}
REPLICAS=${REPLICAS:-3}
if [ "$PORT" = 8790 ]; then
	DATA=${DATA:-.tt-data/fleet}
else
	DATA=${DATA:-.tt-data/fleet-$PORT} # a fleet beside the first has data of its own
fi

case "$PORT$REDIS_PORT$REPLICAS" in
*[!0-9]*)
	echo "make fleet: PORT, REDIS_PORT and REPLICAS are numbers (PORT=$PORT REDIS_PORT=$REDIS_PORT REPLICAS=$REPLICAS)" >&2
	exit 2
	;;
esac
if [ "$REPLICAS" -lt 1 ] || [ "$REPLICAS" -gt 9 ]; then
	echo "make fleet: REPLICAS is from 1 to 9, got $REPLICAS" >&2
	exit 2
fi
last=$((PORT + 2 * REPLICAS - 1))
if [ "$PORT" -lt 1024 ] || [ "$last" -gt 65535 ]; then
	echo "make fleet: the replicas need ports $PORT to $last; pick a PORT from 1024 to $((65536 - 2 * REPLICAS))" >&2
	exit 2
fi
if [ "$REDIS_PORT" -ge "$PORT" ] && [ "$REDIS_PORT" -le "$last" ]; then
	echo "make fleet: REDIS_PORT $REDIS_PORT is one of the replicas' ports ($PORT to $last); pick another" >&2
	exit 2
fi

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

replica 0 "$PORT" $((PORT + 1))
ready "$DATA/r0.log" "$pid0"
n=1
while [ "$n" -lt "$REPLICAS" ]; do
	replica "$n" $((PORT + 2 * n)) $((PORT + 2 * n + 1)) --control "http://127.0.0.1:$((PORT + 1))"
	n=$((n + 1))
done
n=1
while [ "$n" -lt "$REPLICAS" ]; do
	eval "ready \"\$DATA/r$n.log\" \"\$pid$n\""
	n=$((n + 1))
done

KEY=$(sed -n 's/^  export TT_KEY=//p' "$DATA/r0.log" | tail -1)
echo "make fleet: $REPLICAS replicas and one redis-server are serving."
echo
n=0
while [ "$n" -lt "$REPLICAS" ]; do
	role=mirror
	[ "$n" -eq 0 ] && role=owner
	printf '  replica %d (%s)%s gateway http://127.0.0.1:%d   accountant http://127.0.0.1:%d   log %s\n' \
		"$n" "$role" "$( [ "$role" = owner ] && echo ' ' )" $((PORT + 2 * n)) $((PORT + 2 * n + 1)) "$DATA/r$n.log"
	n=$((n + 1))
done
ports="" # seven requests, round-robin over the replicas
n=0
while [ "$n" -lt 7 ]; do
	ports="$ports $((PORT + 2 * (n % REPLICAS)))"
	n=$((n + 1))
done
cat <<EOT
  redis-server        127.0.0.1:$REDIS_PORT                                          log $DATA/redis.log

  export TT_ADMIN_TOKEN=$TT_ADMIN_TOKEN
  export TT_KEY=$KEY    # replica 0's demo key, for org:acme/team:ml/user:dev1

Spread requests over the replicas: user_rpm (store: redis) admits 6 a
minute for the whole fleet, so the 7th of these is a 429 whichever replica
it reaches (now and then the 6th: at the end of an amount its last unit can
sit in the other replica's lease for a few seconds before it goes back):

  for p in$ports; do curl -s -o /dev/null -w '%{http_code}\\n' \\
    http://127.0.0.1:\$p/v1/chat/completions -H "Authorization: Bearer \$TT_KEY" \\
    -H 'Content-Type: application/json' \\
    -d '{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'; done

Keys are minted on the owner (or through any replica, which forwards):

  bin/tokentriage keys mint --owner org:acme/team:ml/user:dev2 --accountant http://127.0.0.1:$((PORT + 1))

Ctrl-C stops them all.
EOT
wait
