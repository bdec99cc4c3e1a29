package fleet

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/converter"
	"golang.org/x/crypto/ssh"

	"adoption/intent"
	"adoption/workflows"
	"adoption/workflows/fleet/relay"
)

// boundsFleet is a fleet of n nodes at its largest: every node started
// (each with a run ID as the server gives them, node names of 16
// characters), a fleet migrate of web on every node, the big wave's in
// flight, two more migrates following the waves, a tenth of them failed with a reason of 60 characters, and the
// fleet's 50 event lines each as long as the code writes them at this size.
func boundsFleet(n int) *FleetState {
	in := scaleFleet(n, 0)
	st := in.Resume
	for i := range st.Nodes {
		if i > 0 {
			st.Nodes[i].Node = fmt.Sprintf("node-eu-w%07d", i)
		}
		st.Nodes[i].RunID = uuid.NewString()
		st.Nodes[i].Phase = workflows.PhaseAdopted
	}
	why := strings.Repeat("refused: the preview drops port 9999 ", 2)[:60]
	op := &FleetOp{ID: uuid.NewString(), Kind: relay.KindMigrate, Module: "web"}
	for i, nd := range st.Nodes {
		on := OpNode{Node: nd.Node, Wave: st.WaveOf(i), State: opDone}
		if on.Wave == len(st.Waves.Sizes) {
			on.State = opRunning
			if i%10 == 0 {
				on.State, on.Why = opFailed, why
			}
		}
		op.Nodes = append(op.Nodes, on)
	}
	st.Op = op
	for _, module := range []string{"dns", "db"}[:maxFollowing] { // as many migrates following the waves as taken
		more := *op
		more.ID, more.Module, more.Nodes = uuid.NewString(), module, append([]OpNode{}, op.Nodes...)
		st.Following = append(st.Following, &more)
	}
	lo, _ := st.wave(len(st.Waves.Sizes))
	lines := []string{st.waveStart(lo), op.Standing(), st.heldBy()}
	for len(st.Events) < maxFleetEvents {
		st.Events = append(st.Events, "12:00:00 "+lines[len(st.Events)%len(lines)])
	}
	return st
}

// testSigner is a fresh ed25519 key, as an operator's ssh key signs.
func testSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// encoded is v's payload as the default data converter writes it (the
// payload codec adds a few bytes: docs/fleet.md).
func encoded(t *testing.T, v any) int {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(p.GetData())
}

// The fleet's payloads and pending work at MaxFleetNodes, each against
// its limit: the continue-as-new input (the state, the op, the start
// intents still unspent: none here), the result, the status query's
// answer, a wave's relay activities and the largest one's input, signed
// for each node as the CLI signs. Prints each margin.
func TestFleetBoundsAt50000(t *testing.T) {
	n := MaxFleetNodes
	st := boundsFleet(n)
	check := func(what string, size, limit int) {
		t.Logf("%-48s %9d of %9d (%.1fx margin)", what, size, limit, float64(limit)/float64(max(size, 1)))
		if size > limit {
			t.Errorf("%s at %d nodes: %d, over its limit %d", what, n, size, limit)
		}
	}
	can := FleetInput{Name: st.Name, Resume: st}
	check("continue-as-new input (bytes)", encoded(t, can), PayloadLimit)
	check("result (bytes)", encoded(t, st), PayloadLimit)
	check("status query, first page (bytes)", encoded(t, st.page(FleetPage{})), PayloadLimit)
	check("status query, last page (bytes)", encoded(t, st.page(FleetPage{From: n - 10})), PayloadLimit)

	var wave []int
	for j, on := range st.Op.Nodes {
		if on.State == opRunning || on.State == opFailed {
			wave = append(wave, j)
		}
	}
	batches := relayBatches(wave)
	check(fmt.Sprintf("a wave of %d nodes: relay activities", len(wave)), len(batches), PendingActivitiesLimit)

	signer := testSigner(t)
	var batch relay.Batch
	for _, j := range batches[0] {
		node := st.Op.Nodes[j].Node
		one, err := intent.Each("fleet-migrate", []intent.Target{{Node: node, PlanHash: strings.Repeat("ab", 32)}}, map[string]string{"module": "web"}, time.Now(), 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		s, err := intent.Sign(one[0], signer)
		if err != nil {
			t.Fatal(err)
		}
		batch.Requests = append(batch.Requests, relay.NodeRequest{Node: node, Kind: relay.KindMigrate, Module: "web", ID: st.Op.ID, Intent: &s})
	}
	check("a relay activity's input, signed per node (bytes)", encoded(t, batch), PayloadLimit)

	// What travels packed comes back whole (run IDs to their 64-bit start).
	p, err := converter.GetDefaultDataConverter().ToPayload(can)
	if err != nil {
		t.Fatal(err)
	}
	var back FleetInput
	if err := converter.GetDefaultDataConverter().FromPayload(p, &back); err != nil {
		t.Fatal(err)
	}
	got := back.Resume
	if len(got.Nodes) != n || got.Nodes[n-1].Node != st.Nodes[n-1].Node || !strings.HasPrefix(st.Nodes[7].RunID, got.Nodes[7].RunID) ||
		len(got.Nodes[7].RunID) != runIDKept || len(got.Op.Nodes) != n || got.Op.Nodes[n-1] != st.Op.Nodes[n-1] || len(back.members()) != n {
		t.Errorf("the carried state does not come back: %d nodes, %d op nodes, %d members", len(got.Nodes), len(got.Op.Nodes), len(back.members()))
	}
}

// A small fleet's payloads stay as an older build reads them: nodes in
// the clear, whole run IDs.
func TestFleetSmallStateUnpacked(t *testing.T) {
	st := boundsFleet(packFrom - 1)
	p, err := converter.GetDefaultDataConverter().ToPayload(st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p.GetData()), "nodes_packed") || !strings.Contains(string(p.GetData()), st.Nodes[5].RunID) {
		t.Error("a fleet under packFrom nodes travels packed")
	}
}

// The status query pages: a page of statusPage nodes at most, with the
// op's targets among them and the op's counts whole.
func TestFleetStatusPages(t *testing.T) {
	st := boundsFleet(2500)
	pg := st.page(FleetPage{From: 2000, Count: 5000})
	if pg.NodesFrom != 2000 || pg.NodesTotal != 2500 || len(pg.Nodes) != 500 || pg.Nodes[0].Node != st.Nodes[2000].Node {
		t.Fatalf("page from 2000: from %d of %d, %d nodes", pg.NodesFrom, pg.NodesTotal, len(pg.Nodes))
	}
	if len(pg.Op.Nodes) != 500 || pg.Op.Total != 2500 || pg.Op.Intents != nil {
		t.Errorf("page's op: %d nodes of %d", len(pg.Op.Nodes), pg.Op.Total)
	}
	if got := pg.Op.Standing(); !strings.HasPrefix(got, "107 of 2500 node(s) done; 239 failed: "+st.Nodes[2000].Node) || !strings.HasSuffix(got, "; and 219 more") {
		t.Errorf("a page's op standing %q, want the op's counts, the page's failed nodes (20), and 219 more", got)
	}
	if first := st.page(FleetPage{}); len(first.Nodes) != statusPage || first.NodesFrom != 0 {
		t.Errorf("first page: %d nodes from %d", len(first.Nodes), first.NodesFrom)
	}
}
