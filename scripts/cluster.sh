#!/usr/bin/env bash
# A production-shaped Temporal on this machine: Temporal's own server
# (go.temporal.io/server, the dev server's version: frontend, history,
# matching and worker services in one process) on Debian's PostgreSQL 15
# with SQL advanced visibility, schemas set up by the server's SQL tool,
# the project's search attributes registered, Worker Deployment versioning
# on, mTLS between every client and the frontend. `make cluster` runs
# `scripts/cluster.sh start`, `make cluster-stop` `scripts/cluster.sh stop`.
# The dynamic config it sets, and why: docs/operations.md.
set -euo pipefail

SERVER_VERSION=${SERVER_VERSION:-v1.29.1}
CACHE=${CACHE:-$HOME/.cache/adoption}
BIN=$CACHE/cluster/bin
DIR=${CLUSTER_DIR:-$PWD/.adoption/cluster}
PG_PORT=${PG_PORT:-5433}
PORT=${CLUSTER_PORT:-7233}
PG_BIN=/usr/lib/postgresql/15/bin
TEMPORAL=${TEMPORAL:-$CACHE/bin/temporal}
ATTRS=(AdoptionNode AdoptionPhase AdoptionAttention)

die() { echo "cluster: $*" >&2; exit 1; }

build() {
	[ -x "$BIN/server" ] && [ -x "$BIN/sql" ] && return
	echo "cluster: building Temporal's server $SERVER_VERSION (a few minutes)"
	mkdir -p "$BIN"
	GOBIN=$BIN go install "go.temporal.io/server/cmd/server@$SERVER_VERSION" "go.temporal.io/server/cmd/tools/sql@$SERVER_VERSION"
}

modroot() { echo "$(go env GOMODCACHE)/go.temporal.io/server@$SERVER_VERSION"; }

postgres() {
	[ -x "$PG_BIN/pg_ctl" ] || die "PostgreSQL 15 is not installed ($PG_BIN/pg_ctl): apt-get install postgresql-15 (scripts/deps.sh)"
	mkdir -p "$DIR"
	chown postgres "$DIR"
	if [ ! -f "$DIR/pg/PG_VERSION" ]; then
		install -d -o postgres "$DIR/pg"
		runuser -u postgres -- "$PG_BIN/initdb" -D "$DIR/pg" -A trust -U temporal >"$DIR/initdb.log"
	fi
	if ! runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$DIR/pg" status >/dev/null 2>&1; then
		runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$DIR/pg" -l "$DIR/pg.log" -w \
			-o "-p $PG_PORT -k $DIR/pg -c listen_addresses=127.0.0.1" start >/dev/null
	fi
}

schemas() {
	local sql=$BIN/sql root
	root=$(modroot)
	export SQL_PLUGIN=postgres12 SQL_HOST=127.0.0.1 SQL_PORT=$PG_PORT SQL_USER=temporal SQL_PASSWORD=
	for db in temporal temporal_visibility; do
		local dir=$root/schema/postgresql/v12/temporal/versioned
		[ $db = temporal_visibility ] && dir=$root/schema/postgresql/v12/visibility/versioned
		"$sql" --db $db create-database >/dev/null 2>&1 || true # there already
		"$sql" --db $db setup-schema -v 0.0 >/dev/null 2>&1 || true # set up already
		"$sql" --db $db update-schema -d "$dir" >"$DIR/schema-$db.log" 2>&1 || { cat "$DIR/schema-$db.log"; die "update-schema $db failed"; }
	done
}

# certs: a CA, the frontend's (and the other services') certificate, and a
# client certificate for the workers, the CLI and the server's own worker.
certs() {
	local c=$DIR/tls
	[ -f "$c/client.pem" ] && return
	mkdir -p "$c"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 -subj /CN=adoption-cluster-ca \
		-keyout "$c/ca.key" -out "$c/ca.pem" 2>/dev/null
	for who in server client; do
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=$who -keyout "$c/$who.key" -out "$c/$who.csr" 2>/dev/null
		printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >"$c/$who.ext"
		openssl x509 -req -in "$c/$who.csr" -CA "$c/ca.pem" -CAkey "$c/ca.key" -CAcreateserial -days 365 -extfile "$c/$who.ext" -out "$c/$who.pem" 2>/dev/null
	done
	chmod 600 "$c"/*.key
}

config() {
	local c=$DIR/tls
	mkdir -p "$DIR/config/dynamicconfig"
	cp "$(dirname "$0")/cluster/dynamicconfig.yaml" "$DIR/config/dynamicconfig/adoption.yaml"
	sed -e "s|@PG_PORT@|$PG_PORT|g" -e "s|@PORT@|$PORT|g" -e "s|@TLS@|$c|g" -e "s|@DIR@|$DIR|g" \
		"$(dirname "$0")/cluster/temporal.yaml" >"$DIR/config/development.yaml"
}

tctl() { "$TEMPORAL" --address 127.0.0.1:$PORT --tls-ca-path "$DIR/tls/ca.pem" --tls-cert-path "$DIR/tls/client.pem" --tls-key-path "$DIR/tls/client.key" "$@"; }

start() {
	command -v openssl >/dev/null || die "openssl is not installed"
	[ -x "$TEMPORAL" ] || die "the Temporal CLI is not built ($TEMPORAL): make temporal-cli"
	build
	postgres
	schemas
	certs
	config
	if ! tctl operator cluster health >/dev/null 2>&1; then
		setsid nohup "$BIN/server" --root "$DIR" --config config --env development start >"$DIR/server.log" 2>&1 </dev/null &
		echo $! >"$DIR/server.pid"
		for _ in $(seq 1 120); do tctl operator cluster health >/dev/null 2>&1 && break; sleep 0.5; done
		tctl operator cluster health >/dev/null || { tail -30 "$DIR/server.log"; die "the server did not answer on 127.0.0.1:$PORT"; }
	fi
	tctl operator namespace describe --namespace default >/dev/null 2>&1 || tctl operator namespace create --namespace default --retention 72h >/dev/null
	# A new namespace reaches the frontend's cache within seconds: until
	# then, registering search attributes fails, so try again.
	for _ in $(seq 1 60); do
		for a in "${ATTRS[@]}"; do
			tctl operator search-attribute create --namespace default --name "$a" --type Keyword >/dev/null 2>&1 || true # registered already
		done
		tctl operator search-attribute list --namespace default 2>/dev/null | grep -q "${ATTRS[-1]}" && break
		sleep 1
	done
	tctl operator search-attribute list --namespace default | grep -q "${ATTRS[-1]}" || die "search attributes not registered"
	cat <<MSG
Temporal $SERVER_VERSION on PostgreSQL 15 (127.0.0.1:$PG_PORT), frontend 127.0.0.1:$PORT with mTLS:
  temporal: {address: 127.0.0.1:$PORT, tls: {ca: $DIR/tls/ca.pem, cert: $DIR/tls/client.pem, key: $DIR/tls/client.key}}
  or TEMPORAL_ADDRESS=127.0.0.1:$PORT TEMPORAL_TLS_SERVER_CA_CERT_PATH=$DIR/tls/ca.pem
     TEMPORAL_TLS_CLIENT_CERT_PATH=$DIR/tls/client.pem TEMPORAL_TLS_CLIENT_KEY_PATH=$DIR/tls/client.key
MSG
}

stop() {
	if [ -f "$DIR/server.pid" ]; then
		local pid
		pid=$(cat "$DIR/server.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
		rm -f "$DIR/server.pid"
		echo "cluster: server stopped"
	fi
	if [ -f "$DIR/pg/PG_VERSION" ]; then
		runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$DIR/pg" -m fast stop >/dev/null 2>&1 && echo "cluster: PostgreSQL stopped" || true
	fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) die "usage: $0 start|stop" ;;
esac
