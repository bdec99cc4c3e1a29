#!/usr/bin/env bash
# The demo: the seed's five steps on three reference nodes, unattended.
#   1. three nodes run the predecessor as the seed's node does: each its own
#      Docker engine inside the node's network namespace, services as
#      containers with published ports, the real ufw with the ufw-docker
#      arrangement deciding what reaches them, host services, synced files;
#      clients in a peer namespace with public addresses. The predecessor's
#      control daemons are stopped (none runs here).
#   2. the agents run on the nodes (in their namespaces), reach Temporal over
#      a management link and their node's engine through docker.host; a fleet
#      adopts the nodes, the control node first; its genesis finds a
#      foundation port held by the predecessor and the configuration fixes it.
#   3. one module per node migrates, data preserved, clients served; one
#      cutover fails, rolls back by itself and is retried after the fix; a
#      new service the predecessor never ran is started.
#   4. the next node follows only when the previous one has migrated.
#   5. a preview refuses the control node's flip, naming a port; with that
#      port deliberately dropped it approves, and every node flips.
# `scripts/demo.sh clean` (make demo-clean) removes everything it created.
set -euo pipefail
cd "$(dirname "$0")/.."
# Close every descriptor inherited above stderr: the agents, engines and
# relays this starts outlive it, and must not keep e.g. the lock of a
# `flock LOCK make demo` held for as long as the demo's nodes live.
for fd in $(ls /proc/$$/fd); do
	[ "$fd" -gt 2 ] && [ "$fd" -lt 255 ] && eval "exec $fd>&-" 2>/dev/null || true
done

STATE=.adoption
DEMO=$STATE/demo
UI=${ADOPT_UI:-http://127.0.0.1:8233}
NODES=(n1 n2 n3)
TEMPORAL_BIN=${ADOPT_TEMPORAL_BIN:-$HOME/.cache/adoption/bin/temporal}
IMG=adoption-demo-svc
# The codec key (make dev-server writes it): the agents, the orchestrator
# and the CLI encrypt payloads with it and key the plans' digests by it;
# the Web UI decodes through the codec server that holds it.
CODEC_KEY=$PWD/$STATE/codec.key

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cfg() { echo "$DEMO/$1/config.yaml"; }
adopt() { ./bin/adopt --ui "$UI" "$@"; }

# client NODE PATH: an HTTP GET from NODE's peer namespace (the public) to a
# published port of the node, through its DNAT and its firewall.
addr() { echo "198.19.${1#n}.1"; }
client() { ip netns exec "adopt-$1-peer" ./bin/adopt-sandbox get "http://$(addr "$1"):$2"; }
reach() { ip netns exec "adopt-$1-peer" ./bin/adopt-sandbox connect "$(addr "$1"):$2"; }
# on NODE CMD...: run on the node, as its own processes run (its netns).
on() { local n=$1; shift; nsenter --net="/run/netns/adopt-$n" -- "$@"; }
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
if [ ! -f "$CODEC_KEY" ]; then
	(umask 077 && head -c 32 /dev/urandom > "$CODEC_KEY")
fi
DEMO_START=$(date +%s)
# The operator's key of this run (0600): every node's configuration trusts
# it (authority.operators) and the CLI signs every request with it
# (operator.sign_key), so no node acts on an unsigned request.
./bin/adopt-sandbox operator-key "$PWD/$DEMO/operator_key" >/dev/null
export ADOPT_SANDBOX_OPERATOR_KEY=$PWD/$DEMO/operator_key
# The witness's key: every node lists its public half (flip.witness.key)
# and takes a flip's verdict only signed by it; the orchestrator signs.
./bin/adopt-sandbox operator-key "$PWD/$DEMO/witness_key" >/dev/null
export ADOPT_SANDBOX_WITNESS_KEY=$PWD/$DEMO/witness_key

say "1. Three nodes running the predecessor"
# The predecessor's services and the mesh's modules are one small service
# (v1 and v2), built here: no registry is reachable. Each node's engine gets
# them with docker save | docker load.
./bin/adopt-sandbox images --repo "$IMG"
t0=$(date +%s%N)
./bin/adopt-sandbox up --name n1 --index 1 --dir "$DEMO/n1" --plan scripts/demo/n1.yaml --codec-key-file "$CODEC_KEY" --fleet demo --image "$IMG:v1" --load "$IMG:v2" \
	--allow 22/tcp,8081/tcp --closed 5001/tcp --service mail:18025:8025/tcp,metrics:19100:9100/tcp:unrouted
./bin/adopt-sandbox up --name n2 --index 2 --dir "$DEMO/n2" --plan scripts/demo/n2.yaml --codec-key-file "$CODEC_KEY" --fleet demo --image "$IMG:v1" --load "$IMG:v2" \
	--allow 22/tcp --closed "" --service web:18080:8080/tcp
./bin/adopt-sandbox up --name n3 --index 3 --dir "$DEMO/n3" --plan scripts/demo/n3.yaml --codec-key-file "$CODEC_KEY" --fleet demo --image "$IMG:v1" --load "$IMG:v2" \
	--allow 22/tcp,53/udp --closed "" --service ""
echo "three reference nodes up in $(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN{printf "%.1f", (b-a)/1e9}') s"
printf 'MAIL_RELAY=predecessor\n' > "$DEMO/n1/root/srv/mail/mail.env"
wait_for "the predecessor's services" client n1 18025/health
wait_for "the predecessor's services" client n2 18080/health
MAIL_SUMS=$(client n1 18025/sums)
WEB_SUMS=$(client n2 18080/sums)
echo "a client (198.19.1.2) reaches n1's mail on 18025 through DNAT: $(client n1 18025/version), data checksums:"
echo "$MAIL_SUMS" | sed 's/^/    /'
echo "n1's metrics are published on 19100 but not routed by ufw: a client's connection is $(reach n1 19100)"

say "2. One orchestrator (the workflows) and the node agents, on their nodes (the predecessor's control daemons are stopped)"
# The orchestrator makes its build the current version of Worker Deployment
# "adoption" (--make-current: the demo's dev server may remember an earlier
# build from a run before this one); the agents run only their node's
# activities.
ADOPT_TEMPORAL_CODEC_KEY_FILE=$CODEC_KEY ADOPT_WITNESS_KEY=$ADOPT_SANDBOX_WITNESS_KEY setsid nohup ./bin/adopt-worker orchestrate --make-current > "$DEMO/worker-orchestrator.log" 2>&1 < /dev/null &
echo $! > "$DEMO/worker-orchestrator.pid"
for n in "${NODES[@]}"; do
	setsid nohup nsenter --net="/run/netns/adopt-$n" -- ./bin/adopt-worker run --config "$PWD/$(cfg "$n")" \
		> "$DEMO/worker-$n.log" 2>&1 < /dev/null &
	echo $! > "$DEMO/worker-$n.pid"
done
echo "n1's probe, run on n1:"
on n1 ./bin/adopt-worker probe --config "$(cfg n1)" | sed 's/^/    /'

say "3. The fleet: control node first"
cat > "$DEMO/fleet.yaml" <<EOF
temporal:
  address: ${ADOPT_TEMPORAL_ADDRESS:-127.0.0.1:7233}
  codec_key_file: $CODEC_KEY
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
# `adopt wait` ends at once on a failure, and until the queued retry runs
# the failure it retries is still the one shown: wait for the retry's own.
wait_for "n1's genesis after the retry" await n1 --genesis done --timeout 5s
await n1 --genesis done
echo "n2 has not started: the fleet waits for n1's modules"
adopt fleet status --fleet "$DEMO/fleet.yaml" | sed 's/^/    /'

say "4. Migrate one module per node"
adopt migrate n1 mail --config "$(cfg n1)"
await n1 --module mail --state migrated
echo "clients of n1's mail now get $(client n1 18025/version); data checksums unchanged: $(same "$(client n1 18025/sums)" "$MAIL_SUMS")"

await n2 --phase adopted
adopt migrate n2 web --config "$(cfg n2)"
await n2 --module web --state failed
echo "n2's cutover failed and rolled back by itself:"
adopt status n2 --config "$(cfg n2)" | sed -n '/^MODULES/,/^$/p' | sed 's/^/    /'
echo "clients of n2's web get $(client n2 18080/version) again; data unchanged: $(same "$(client n2 18080/sums)" "$WEB_SUMS")"
echo "fix: drop the failing flag from the module, then adopt retry n2 web"
sed -i 's|cmd: \["-fail", "nolisten"\]|cmd: ["-listen", ":8080", "-data", "/named,/anon"]|' "$(cfg n2)"
adopt retry n2 web --config "$(cfg n2)"
wait_for "n2's web after the retry" await n2 --module web --state migrated --timeout 5s
await n2 --module web --state migrated
echo "clients of n2's web now get $(client n2 18080/version); data checksums unchanged: $(same "$(client n2 18080/sums)" "$WEB_SUMS")"

await n3 --phase adopted
adopt migrate n3 dns --config "$(cfg n3)"
await n3 --module dns --state migrated
adopt migrate n3 shop --config "$(cfg n3)"
await n3 --module shop --state migrated
echo "n3's new service shop runs in n3's engine, published on 18443: a client's connection is $(reach n3 18443)"

say "5. Flip: a preview first"
adopt preview n1 --config "$(cfg n1)" || true
echo "8081/tcp is open on n1 and no module declares it; n1's metrics (19100) are not routed by ufw, yet"
echo "ufw-docker lets the private ranges reach every published port, and the metrics container's own 9100 routed"
echo "(not through DNAT), which the mesh's table does not carry: drop the three deliberately (flip.drop), preview again"
sed -i 's|^  drop: \[\]|  drop: ["8081/tcp", "19100/tcp", "9100/tcp"]|' "$(cfg n1)"
echo "on n3 the same holds for shop's own 8443, routed from the private ranges: dropped deliberately too"
sed -i 's|^  drop: \[\]|  drop: ["8443/tcp"]|' "$(cfg n3)"
for n in "${NODES[@]}"; do
	if ! out=$(adopt preview "$n" --config "$(cfg "$n")" 2>&1); then
		echo "$out"
		echo "the preview of $n refuses: see above" >&2
		exit 1
	fi
done
adopt preview n1 --config "$(cfg n1)"
for n in "${NODES[@]}"; do
	adopt flip "$n" --config "$(cfg "$n")"
done
for n in "${NODES[@]}"; do
	await "$n" --phase converged
done

say "Where things are"
adopt status --all --config "$(cfg n1)"
echo
adopt fleet status --fleet "$DEMO/fleet.yaml"
echo
echo "after the flip, clients of n1's mail get $(client n1 18025/version || echo UNREACHABLE); n2's web $(client n2 18080/version || echo UNREACHABLE); n3's shop: $(reach n3 18443)"
echo "n1's firewall is now the mesh's own (table inet adoption); the predecessor's was saved under $DEMO/n1/state/"
echo "Web UI: $UI  (filter: AdoptionPhase=\"converged\"; what needs a person: AdoptionAttention != \"\"; open node-migration/n1 for its steps)"
echo "node-migration/n1's history holds $("$TEMPORAL_BIN" workflow show --workflow-id node-migration/n1 --output json 2>/dev/null | grep -oE 'binary/encrypted|YmluYXJ5L2VuY3J5cHRlZA==' | wc -l) encrypted payloads (binary/encrypted, key $CODEC_KEY); the Web UI decodes them through the codec server on 127.0.0.1:8234"
echo "The demo took $(( $(date +%s) - DEMO_START )) s. Remove it with: make demo-clean"
