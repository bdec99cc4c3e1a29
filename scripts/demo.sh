#!/usr/bin/env bash
# The demo: the seed's five steps on three sandbox nodes, unattended.
#   1. three nodes run the predecessor: a default-deny firewall, listeners,
#      synced files, and (on the host's Docker) two of its services with data;
#      their control daemons are stopped (none runs here).
#   2. a fleet adopts them, the control node first; its genesis finds a
#      foundation port held by the predecessor and the configuration fixes it.
#   3. one module per node migrates, data preserved; one cutover fails, rolls
#      back by itself and is retried after the fix.
#   4. the next node follows only when the previous one has migrated.
#   5. a preview refuses the control node's flip, naming a port; with that
#      port deliberately dropped it approves, and every node flips.
# `scripts/demo.sh clean` (make demo-clean) removes everything it created.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=.adoption
DEMO=$STATE/demo
UI=${ADOPT_UI:-http://127.0.0.1:8233}
NODES=(n1 n2 n3)
TEMPORAL_BIN=${ADOPT_TEMPORAL_BIN:-$HOME/.cache/adoption/bin/temporal}
IMG=adoption-demo-svc

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cfg() { echo "$DEMO/$1/config.yaml"; }
adopt() { ./bin/adopt --ui "$UI" "$@"; }

get() { ./bin/adopt-sandbox get "$1"; }
# wait_for DESC CMD...: poll until CMD succeeds (60 s).
wait_for() {
	local desc=$1; shift
	for _ in $(seq 1 240); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.25
	done
	echo "timed out waiting for: $desc" >&2
	return 1
}
# await NODE ARGS...: adopt wait with the node's configuration.
await() { local n=$1; shift; adopt wait "$n" --config "$(cfg "$n")" "$@"; }
same() { [ "$1" = "$2" ] && echo yes || echo NO; }

stop_workers() {
	for n in orchestrator "${NODES[@]}"; do
		if [ -f "$DEMO/worker-$n.pid" ]; then
			kill "$(cat "$DEMO/worker-$n.pid")" 2>/dev/null || true
			rm -f "$DEMO/worker-$n.pid"
		fi
	done
	pkill -f "adopt-worker watchdog --config $PWD/$DEMO" 2>/dev/null || true
}

clean() {
	stop_workers
	# Deleted, not only terminated: a new demo must not read an old run.
	for id in fleet/demo node-migration/n1 node-migration/n2 node-migration/n3; do
		"$TEMPORAL_BIN" workflow terminate --workflow-id "$id" --reason demo-clean >/dev/null 2>&1 || true
		"$TEMPORAL_BIN" workflow delete --workflow-id "$id" >/dev/null 2>&1 || true
	done
	for n in "${NODES[@]}"; do
		./bin/adopt-sandbox down --name "$n" --dir "$DEMO/$n" >/dev/null 2>&1 || true
	done
	for c in demo-mail demo-web; do
		docker rm -f -v "$c" "$c.next" "$c.predecessor" >/dev/null 2>&1 || true
	done
	docker volume rm -f demo-mail-data demo-web-data >/dev/null 2>&1 || true
	docker rmi -f "$IMG:v1" "$IMG:v2" >/dev/null 2>&1 || true
	rm -rf "$DEMO" "$STATE/sandbox"
}

if [ "${1:-}" = clean ]; then
	clean
	echo "demo cleaned"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "make demo needs root: it creates network namespaces and a firewall inside them" >&2
	exit 1
fi
clean
mkdir -p "$DEMO"

say "1. Three nodes running the predecessor"
# The predecessor's services and the mesh's modules are one small service
# (v1 and v2), built here: no registry is reachable.
./bin/adopt-sandbox images --repo "$IMG"
./bin/adopt-sandbox up --name n1 --index 1 --dir "$DEMO/n1" --plan scripts/demo/n1.yaml \
	--allow 22/tcp,8081/tcp --allow-only 18025/tcp --closed 5001/tcp
./bin/adopt-sandbox up --name n2 --index 2 --dir "$DEMO/n2" --plan scripts/demo/n2.yaml \
	--allow 22/tcp --allow-only 18080/tcp --closed ""
./bin/adopt-sandbox up --name n3 --index 3 --dir "$DEMO/n3" --plan scripts/demo/n3.yaml \
	--allow 22/tcp,53/udp --closed ""
mkdir -p "$DEMO/n1/root/srv/mail" "$DEMO/n2/bind" "$DEMO/n1/bind"
printf 'MAIL_RELAY=predecessor\n' > "$DEMO/n1/root/srv/mail/mail.env"
docker run -d --name demo-mail --restart unless-stopped -v demo-mail-data:/named -v "$PWD/$DEMO/n1/bind:/bind" \
	-p 127.0.0.1:18025:8080 "$IMG:v1" >/dev/null
docker run -d --name demo-web --restart unless-stopped -v demo-web-data:/named -v "$PWD/$DEMO/n2/bind:/bind" \
	-p 127.0.0.1:18080:8080 "$IMG:v1" >/dev/null
wait_for "the predecessor's services" get http://127.0.0.1:18025/health
wait_for "the predecessor's services" get http://127.0.0.1:18080/health
MAIL_SUMS=$(get http://127.0.0.1:18025/sums)
WEB_SUMS=$(get http://127.0.0.1:18080/sums)
echo "predecessor demo-mail serves $(get http://127.0.0.1:18025/version) with data checksums:"
echo "$MAIL_SUMS" | sed 's/^/    /'

say "2. One orchestrator (the workflows) and the node agents (their own processes; the predecessor's control daemons are stopped)"
# The orchestrator makes its build the current version of Worker Deployment
# "adoption"; the agents run only their node's activities.
setsid nohup ./bin/adopt-worker orchestrate > "$DEMO/worker-orchestrator.log" 2>&1 < /dev/null &
echo $! > "$DEMO/worker-orchestrator.pid"
for n in "${NODES[@]}"; do
	setsid nohup ./bin/adopt-worker run --config "$PWD/$(cfg "$n")" > "$DEMO/worker-$n.log" 2>&1 < /dev/null &
	echo $! > "$DEMO/worker-$n.pid"
done
./bin/adopt-worker probe --config "$(cfg n1)" | sed -n '1,12p'

say "3. The fleet: control node first"
cat > "$DEMO/fleet.yaml" <<EOF
temporal:
  address: 127.0.0.1:7233
name: demo
nodes:
  - $PWD/$(cfg n1)
  - $PWD/$(cfg n2)
  - $PWD/$(cfg n3)
EOF
adopt fleet start --fleet "$DEMO/fleet.yaml"
await n1 --phase adopted --genesis failed
echo "genesis on n1 found a collision:"
adopt status n1 --config "$(cfg n1)" | sed -n 's/^GENESIS: /    /p'
echo "fix: foundation.ports.registry 5001/tcp -> 5002/tcp, then adopt retry n1"
sed -i 's|registry: 5001/tcp|registry: 5002/tcp|' "$(cfg n1)"
adopt retry n1 --config "$(cfg n1)"
await n1 --genesis done
echo "n2 has not started: the fleet waits for n1's modules"
adopt fleet status --fleet "$DEMO/fleet.yaml" | sed 's/^/    /'

say "4. Migrate one module per node"
adopt migrate n1 mail --config "$(cfg n1)"
await n1 --module mail --state migrated
echo "demo-mail now serves $(get http://127.0.0.1:18025/version); data checksums unchanged: $(same "$(get http://127.0.0.1:18025/sums)" "$MAIL_SUMS")"

await n2 --phase adopted
adopt migrate n2 web --config "$(cfg n2)"
await n2 --module web --state failed
echo "n2's cutover failed and rolled back by itself:"
adopt status n2 --config "$(cfg n2)" | sed -n '/^MODULES/,/^$/p' | sed 's/^/    /'
echo "demo-web serves $(get http://127.0.0.1:18080/version) again; data unchanged: $(same "$(get http://127.0.0.1:18080/sums)" "$WEB_SUMS")"
echo "fix: drop the failing flag from the module, then adopt retry n2 web"
sed -i 's|cmd: \["-fail", "nolisten"\]|cmd: []|' "$(cfg n2)"
adopt retry n2 web --config "$(cfg n2)"
await n2 --module web --state migrated
echo "demo-web now serves $(get http://127.0.0.1:18080/version); data checksums unchanged: $(same "$(get http://127.0.0.1:18080/sums)" "$WEB_SUMS")"

await n3 --phase adopted
adopt migrate n3 dns --config "$(cfg n3)"
await n3 --module dns --state migrated

say "5. Flip: a preview first"
adopt preview n1 --config "$(cfg n1)" || true
echo "8081/tcp is open on n1 and no module declares it: drop it deliberately (flip.drop), preview again"
sed -i 's|^  drop: \[\]|  drop: ["8081/tcp"]|' "$(cfg n1)"
adopt preview n1 --config "$(cfg n1)"
for n in "${NODES[@]}"; do
	adopt flip "$n" --config "$(cfg "$n")"
done
for n in "${NODES[@]}"; do
	await "$n" --phase converged
done

say "Where things are"
adopt status --config "$(cfg n1)"
echo
adopt fleet status --fleet "$DEMO/fleet.yaml"
echo
echo "n1's firewall is now the mesh's own (table inet adoption); the predecessor's was saved under $DEMO/n1/state/"
echo "Web UI: $UI  (filter: AdoptionPhase=\"converged\"; open node-migration/n1 for its steps)"
echo "Remove the demo with: make demo-clean"
