#!/usr/bin/env bash
# The demo: a sandbox node (network namespace, default-deny firewall,
# listeners, predecessor files), its worker, its workflow to `adopted`.
# `scripts/demo.sh clean` removes everything the demo created.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=.adoption
NODE=n1
DIR=$STATE/sandbox/$NODE
UI=${ADOPT_UI:-http://127.0.0.1:8233}
CONFIG=$DIR/config.yaml

stop_worker() {
	if [ -f "$STATE/worker-$NODE.pid" ]; then
		kill "$(cat "$STATE/worker-$NODE.pid")" 2>/dev/null || true
		rm -f "$STATE/worker-$NODE.pid"
	fi
}

if [ "${1:-}" = clean ]; then
	stop_worker
	if [ -f "$CONFIG" ] && ./bin/adopt status "$NODE" --config "$CONFIG" >/dev/null 2>&1; then
		# End the workflow so a new demo can start the node again.
		temporal_bin=${ADOPT_TEMPORAL_BIN:-$HOME/.cache/adoption/bin/temporal}
		"$temporal_bin" workflow terminate --workflow-id "node-migration/$NODE" --reason "demo-clean" >/dev/null 2>&1 || true
	fi
	./bin/adopt-sandbox down --name "$NODE" --dir "$DIR" 2>/dev/null || true
	rm -rf "$STATE/sandbox"
	echo "demo cleaned"
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	echo "make demo needs root: it creates network namespaces and a firewall inside them" >&2
	exit 1
fi

# A previous demo's node is removed first, so the demo can run again.
"$0" clean >/dev/null

echo "== 1. A sandbox node running the predecessor: default-deny firewall, listeners, synced files"
./bin/adopt-sandbox up --name "$NODE" --index 1 --dir "$DIR"

echo "== 2. Its worker (the node agent), polling Temporal"
ADOPT_CONFIG=$CONFIG setsid nohup ./bin/adopt-worker run > "$STATE/worker-$NODE.log" 2>&1 < /dev/null &
echo $! > "$STATE/worker-$NODE.pid"

echo "== 3. Read-only probe of the node, without Temporal"
./bin/adopt-worker probe --config "$CONFIG" | sed -n '1,20p'

echo "== 4. Start the node's migration workflow"
./bin/adopt start "$NODE" --config "$CONFIG" --ui "$UI"

echo "== 5. Wait for the node to be adopted"
for _ in $(seq 1 120); do
	phase=$(./bin/adopt status "$NODE" --config "$CONFIG" --json 2>/dev/null | sed -n 's/^  "phase": "\(.*\)",$/\1/p' || true)
	[ "$phase" = adopted ] || [ "$phase" = failed ] && break
	sleep 0.5
done
./bin/adopt status "$NODE" --config "$CONFIG" --ui "$UI"
echo
./bin/adopt status --config "$CONFIG"
echo
echo "Web UI: $UI (filter with: AdoptionPhase=\"adopted\")"
echo "Stop and remove the demo with: make demo-clean"
[ "$phase" = adopted ]
