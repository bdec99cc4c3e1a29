package flip

import (
	"encoding/json"
	"testing"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
)

// TestReadersLeaveTheListingAsFound: a listing kept for the next
// (nft.Kept) is shared by every reader it is given to, so no reader may
// change it. The probe's evaluations and the preview (with the spec it
// carries and the fingerprints) run on the control node's and a
// ufw-docker node's rulesets, which must be as they were, field for field.
func TestReadersLeaveTheListingAsFound(t *testing.T) {
	spec := MeshSpec{Node: "bnprobe", Input: allow(OwnerManagement, "22/tcp")}
	for _, name := range []string{"control-node", "ufw-docker"} {
		rs, node := fwtest.LoadFixture(t, name)
		before := marshalled(t, rs, node)
		readers := map[string]func(){
			"OpenPortsOn":      func() { eval.OpenPortsOn(rs, node) },
			"ClassOpenings":    func() { eval.ClassOpenings(rs, node) },
			"BridgeOpenings":   func() { eval.BridgeOpenings(rs, node) },
			"PreviewFlipOn":    func() { PreviewFlipOn(rs, node, spec) },
			"EffectiveSpec":    func() { EffectiveSpec(rs, spec) },
			"FoundFingerprint": func() { FoundFingerprint(rs) },
		}
		for what, read := range readers {
			read()
			if after := marshalled(t, rs, node); after != before {
				t.Fatalf("%s: %s changed the ruleset or node it read", name, what)
			}
		}
	}
}

func marshalled(t *testing.T, rs *firewall.Ruleset, node firewall.Node) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Ruleset *firewall.Ruleset
		Node    firewall.Node
	}{rs, node})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
