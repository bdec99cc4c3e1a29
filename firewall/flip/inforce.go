// This file holds the check a confirmation makes of the kernel: that the
// flip it confirms is the one in force. Health checks that pass prove the
// node can reach out, not that the mesh's table decides: after a reboot
// inside the confirm window the predecessor is back, the mesh's table gone,
// and the checks pass all the same.

package flip

import (
	"errors"
	"fmt"
	"strings"

	"adoption/firewall"
)

// ErrNotInForce is wrapped by InForce when the flip is not what the kernel
// holds.
var ErrNotInForce = errors.New("the flip is not in force")

// InForce lists the ruleset and checks that the flip of plan p is in force
// as it was applied: table inet adoption is there with the fingerprint it
// had right after the flip (p.MeshFingerprint; for a plan without it,
// derived, the one the preview approved; "" skips that check), every entry point of the predecessor carries the
// flip's neutralising rule ahead of the predecessor's rules, and the found
// firewall's own rules are the ones flipped (FoundOwn, else the whole
// ruleset's FoundFingerprint). Otherwise it says everything that differs,
// wrapping ErrNotInForce.
func (f *Flipper) InForce(p *RevertPlan, derived string) error {
	if p == nil || !validName(p.Node) {
		return fmt.Errorf("not checking the flip: the revert plan names no valid node")
	}
	s, err := f.m.Session()
	if err != nil {
		return err
	}
	defer s.Close()
	_, rs, err := s.Snapshot()
	if err != nil {
		return fmt.Errorf("list the ruleset to check the flip: %w", err)
	}
	node, err := f.readNode()
	if err != nil {
		return fmt.Errorf("check the flip: %w", err)
	}
	return InForceIn(rs, node, p, derived)
}

// InForceIn is InForce on a listed ruleset of node (nil: Docker's bridges
// told by their default names).
func InForceIn(rs *firewall.Ruleset, node *firewall.Node, p *RevertPlan, derived string) error {
	base, mesh, _ := split(rs, p.Node)
	var why []string
	switch {
	case mesh == nil:
		why = append(why, fmt.Sprintf("table inet %s is not in the ruleset", firewall.MeshTable))
	case p.MeshFingerprint != "":
		if fp := meshFingerprint(mesh); fp != p.MeshFingerprint {
			why = append(why, fmt.Sprintf("table inet %s is not the one the flip applied (fingerprint %s, applied %s)", firewall.MeshTable, fp, p.MeshFingerprint))
		}
	case derived != "":
		if fp := meshFingerprint(mesh); fp != derived {
			why = append(why, fmt.Sprintf("table inet %s is not the ruleset the flip applied (fingerprint %s, applied %s)", firewall.MeshTable, fp, derived))
		}
	}
	switch {
	case p.FoundOwn != "":
		if fp := FoundFingerprint(base); fp != p.FoundOwn {
			why = append(why, fmt.Sprintf("the found firewall's own rules are not the ones flipped (fingerprint %s, flipped %s)", fp, p.FoundOwn))
		}
	case p.FoundFingerprint != "":
		if fp := firewall.Fingerprint(base); fp != p.FoundFingerprint {
			why = append(why, fmt.Sprintf("the found ruleset is not the one flipped (fingerprint %s, flipped %s)", fp, p.FoundFingerprint))
		}
	}
	pred, err := analyse(base, node)
	if err != nil {
		why = append(why, "the predecessor's entry points cannot be told: "+err.Error())
	} else {
		for _, pt := range pred.points {
			if w := neutralised(rs, node, p.Node, pt); w != "" {
				why = append(why, w)
			}
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w on node %s: %s", ErrNotInForce, p.Node, strings.Join(why, "; "))
}

// neutralised says what is wrong at entry point pt of rs: "" when the
// flip's neutralising rule is there and comes before every rule of the
// predecessor's in that chain.
func neutralised(rs *firewall.Ruleset, on *firewall.Node, node string, pt point) string {
	where := fmt.Sprintf("chain %s %s %s", pt.family, pt.table, pt.chain)
	t, ch := pt.find(rs)
	if ch == nil {
		return where + " is not in the ruleset"
	}
	at := -1
	for i := range ch.Rules {
		if ch.Rules[i].Comment == neutraliseComment(node) {
			at = i
			break
		}
	}
	switch {
	case at < 0:
		return where + " has lost the flip's neutralising rule: the predecessor decides there again"
	case pt.append:
		return ""
	}
	for i := 0; i < at; i++ {
		r := &ch.Rules[i]
		if o := firewall.RuleOwner(on, t, ch, r).Owner; o == firewall.OwnedByForeign || o == firewall.OwnedByMesh {
			continue // Docker's jumps come first, as Docker inserts them; a mark put back accepts as the flip's rule does
		}
		return fmt.Sprintf("%s: the predecessor's rule handle %d (%s) comes before the flip's neutralising rule", where, r.Handle, firewall.RenderRule(r))
	}
	return ""
}
