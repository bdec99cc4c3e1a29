package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/nodestate"
)

// Unit tests of the node files at the flip: their fates in the node's own
// preview, a conflict refusing before the firewall's transaction, and the
// operator's decision merged in; a decision on a key in no conflict
// refused by name.

// A node file (an sshd drop-in) with a kept key and a key the node changed
// since custody (a drift accepted since) that the mesh sets otherwise: the preview names the kept
// and the conflicting key, no value; the flip is refused with nothing
// flipped; with a decision the flip goes through and writes the merge.
func TestFlipNodeFileConflictRefusedThenDecided(t *testing.T) {
	const p = "/etc/ssh/sshd_config.d/10-mesh.conf"
	const mesh = "Port 22\nPasswordAuthentication no\nX11Forwarding no\n"
	sum := sha256.Sum256([]byte(mesh))
	plan := flipPlanN1()
	plan.NodeFiles = []config.FilePlan{{Path: p, SHA256: hex.EncodeToString(sum[:]), Keep: []string{"Port"}, Format: "spaced"}}
	a, fl, root := flipActsWith(t, plan)
	a.Local = authority.Fixed(plan, map[string][]byte{plan.NodeFiles[0].SHA256: []byte(mesh)}, 30*time.Minute)
	put(t, root, p, "Port 2222\nPasswordAuthentication yes\nX11Forwarding yes\n")
	_, err := a.Files.Take(p)
	must(t, err)
	put(t, root, p, "Port 2200\nPasswordAuthentication hunter2\nX11Forwarding yes\n") // the node's edits since custody
	// The edits are drift, accepted: custody's revert copy moves, the
	// merge's base does not, so the edited key stays a conflict.
	_, err = a.AcceptDrift(context.Background(), DriftInput{Plan: plan.Ref()})
	must(t, err)

	pv, err := a.Preview(context.Background(), PreviewInput{Plan: plan.Ref(), Spec: flipSpecN1})
	must(t, err)
	if pv.Approved || len(pv.NodeFiles) != 1 {
		t.Fatalf("preview: approved %v, node files %+v", pv.Approved, pv.NodeFiles)
	}
	fm := pv.NodeFiles[0]
	if len(fm.Conflicts) != 1 || fm.Conflicts[0].Key != "passwordauthentication" || strings.Join(fm.Kept, ",") != "port" || fm.Digest != "" {
		t.Fatalf("node file fates: %+v", fm)
	}
	if why := strings.Join(pv.Reasons, "; "); !strings.Contains(why, p+" key passwordauthentication") || !strings.Contains(why, "adopt resolve n1 "+p) || strings.Contains(why, "hunter2") {
		t.Fatalf("reasons: %s", why)
	}

	in := flipIn("n1-1")
	in.Plan = plan.Ref()
	res, err := oneTrip(t, a, in)
	if why := refusedTrip(t, res, err); !strings.Contains(why, p+" key passwordauthentication") {
		t.Fatalf("the flip refused for: %s", why)
	}
	if len(fl.Flips) != 0 || read(t, root, p) != "Port 2200\nPasswordAuthentication hunter2\nX11Forwarding yes\n" {
		t.Fatalf("a refused flip changed the node: flips %d, file %q", len(fl.Flips), read(t, root, p))
	}

	// A decision on a key in no conflict is refused by name.
	bad := []FileDecision{{Path: p, Key: "PasswordAuthentication", Take: "node"}, {Path: p, Key: "X11Forwarding", Take: "node"}}
	pv, err = a.Preview(context.Background(), PreviewInput{Plan: plan.Ref(), Spec: flipSpecN1, Decisions: bad})
	must(t, err)
	if pv.Approved || !strings.Contains(strings.Join(pv.Reasons, "; "), p+" X11Forwarding") {
		t.Fatalf("preview with a decision on no conflict: %v %v", pv.Approved, pv.Reasons)
	}

	in.Decisions = []FileDecision{{Path: p, Key: "PasswordAuthentication", Take: "node"}}
	pv, err = a.Preview(context.Background(), PreviewInput{Plan: plan.Ref(), Spec: flipSpecN1, Decisions: in.Decisions})
	must(t, err)
	if !pv.Approved || len(pv.NodeFiles[0].Conflicts) != 0 || pv.NodeFiles[0].Digest == "" || strings.Join(pv.NodeFiles[0].Changed, ",") != "x11forwarding" {
		t.Fatalf("decided preview: approved %v %v, %+v", pv.Approved, pv.Reasons, pv.NodeFiles)
	}
	res, err = oneTrip(t, a, in)
	if err != nil || res.State != nodestate.FlipCommitted {
		t.Fatalf("the decided flip: %+v %v", res, err)
	}
	if got := read(t, root, p); got != "Port 2200\nPasswordAuthentication hunter2\nX11Forwarding no\n" || len(fl.Flips) != 1 {
		t.Fatalf("flipped: %d flips, file %q", len(fl.Flips), got)
	}
}
