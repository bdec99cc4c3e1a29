package filemerge

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/custody"
)

// store is a real custody store under a temporary node root.
func store(t *testing.T) (*custody.Store, string) {
	t.Helper()
	root := t.TempDir()
	return custody.New(root, filepath.Join(t.TempDir(), "state")), root
}

func write(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// nodeFile is a plan with one node file of the given mesh content and keep.
func nodeFile(p, mesh string, keep []string) (*authority.Authority, config.FilePlan) {
	sum := sha256.Sum256([]byte(mesh))
	h := hex.EncodeToString(sum[:])
	f := config.FilePlan{Path: p, SHA256: h, Keep: keep, Format: "spaced"}
	plan := config.Plan{Node: "n1", NodeFiles: []config.FilePlan{f}}
	auth, err := authority.Fixed(plan, map[string][]byte{h: []byte(mesh)}, time.Minute)()
	if err != nil {
		panic(err)
	}
	return auth, f
}

func conflictsOf(t *testing.T, err error) []Conflict {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != ErrFileConflict {
		t.Fatalf("want a %s refusal, got %v", ErrFileConflict, err)
	}
	var cs []Conflict
	if err := ae.Details(&cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// A drift accepted on a node file moves the revert copy, not the merge's
// base: the key the node changed since it was found stays a conflict, and
// the node's edit never silently loses to the mesh.
func TestAcceptedDriftKeepsTheConflict(t *testing.T) {
	s, root := store(t)
	const p = "/etc/ssh/sshd_config.d/10-mesh.conf"
	write(t, root, p, "Port 22\nPasswordAuthentication yes\n")
	if _, err := s.Take(p); err != nil {
		t.Fatal(err)
	}
	write(t, root, p, "Port 22\nPasswordAuthentication hunter2\n") // the node's edit
	rec, err := s.Retake(p)                                        // drift accept
	if err != nil {
		t.Fatal(err)
	}
	if rec.Base == "" || rec.Public().Base != "" || rec.Public().SHA256 != "" {
		t.Fatalf("retaken record: base %q, public %+v", rec.Base, rec.Public())
	}
	auth, _ := nodeFile(p, "Port 22\nPasswordAuthentication no\n", nil)
	m := Merger{Node: "n1", Files: s}
	_, err = m.Check(auth, "node files", "adopt flip n1", auth.Plan.NodeFiles, nil)
	cs := conflictsOf(t, err)
	if len(cs) != 1 || cs[0].Path != p || cs[0].Key != "passwordauthentication" {
		t.Fatalf("conflicts after drift accept: %+v", cs)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a value in the refusal: %v", err)
	}
	// A second accept keeps the first base.
	if rec2, err := s.Retake(p); err != nil || rec2.Base != rec.Base {
		t.Fatalf("second retake: base %q (first %q), %v", rec2.Base, rec.Base, err)
	}
}

// A node file with a kept key and a conflicting one: the check names the
// conflict (not the kept key), a decision settles it, the digest is given
// only once nothing conflicts, and bad decisions are refused by name.
func TestNodeFileKeptConflictDecided(t *testing.T) {
	s, root := store(t)
	const p = "/etc/ssh/sshd_config.d/10-mesh.conf"
	write(t, root, p, "Port 22\nPasswordAuthentication yes\nX11Forwarding no\n")
	if _, err := s.Take(p); err != nil {
		t.Fatal(err)
	}
	write(t, root, p, "Port 2222\nPasswordAuthentication no\nX11Forwarding no\n")
	auth, _ := nodeFile(p, "Port 22\nPasswordAuthentication yes\nX11Forwarding yes\n", []string{"Port"})
	m := Merger{Node: "n1", Files: s, Digest: func(b []byte) string { return "d:" + string(rune('0'+len(b)%10)) }}
	merges, err := m.Check(auth, "node files", "adopt flip n1", auth.Plan.NodeFiles, nil)
	cs := conflictsOf(t, err)
	if len(cs) != 1 || cs[0].Key != "passwordauthentication" || len(merges) != 1 || merges[0].Digest != "" {
		t.Fatalf("conflicts %+v, merges %+v", cs, merges)
	}
	// The conflict by the node's value and the mesh's (no, yes).
	if ks := merges[0].Keys; len(ks) != 1 || ks[0].Key != "passwordauthentication" || ks[0].Old != "d:5" || ks[0].New != "d:6" {
		t.Fatalf("conflict's digests: %+v", ks)
	}
	ds := []Decision{{Path: p, Key: "PasswordAuthentication", Take: "node"}}
	merges, err = m.Check(auth, "node files", "adopt flip n1", auth.Plan.NodeFiles, ds)
	if err != nil {
		t.Fatal(err)
	}
	if fm := merges[0]; len(fm.Conflicts) != 0 || strings.Join(fm.Kept, ",") != "passwordauthentication,port" || strings.Join(fm.Changed, ",") != "x11forwarding" || fm.Digest == "" {
		t.Fatalf("decided merge: %+v", fm)
	}
	// The changed key is named by the digests of its value now and as
	// written, never by the values.
	if ks := merges[0].Keys; len(ks) != 1 || ks[0].Key != "x11forwarding" || ks[0].Old != "d:6" || ks[0].New != "d:7" {
		t.Fatalf("per-key digests: %+v", ks)
	} else if txt := merges[0].Text(); !strings.Contains(txt, "x11forwarding d:6 -> d:7") || strings.Contains(txt, "yes") {
		t.Fatalf("fates: %s", txt)
	}
	content, _, err := m.Merged(auth.Plan.NodeFiles[0], auth.Contents[auth.Plan.NodeFiles[0].SHA256], ds)
	if err != nil || string(content) != "Port 2222\nPasswordAuthentication no\nX11Forwarding yes\n" {
		t.Fatalf("decided content %q, %v", content, err)
	}

	for _, bad := range []struct {
		d    Decision
		want string
	}{
		{Decision{Path: p, Key: "PasswordAuthentication", Take: "both"}, `take "both"`},
		{Decision{Path: p, Key: "X11Forwarding", Take: "node"}, p + " X11Forwarding"},
		{Decision{Path: "/etc/other", Key: "x", Take: "mesh"}, "/etc/other"},
	} {
		_, err := m.Check(auth, "node files", "adopt flip n1", auth.Plan.NodeFiles, []Decision{bad.d})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("decision %+v: want a refusal naming %q, got %v", bad.d, bad.want, err)
		}
	}
}
