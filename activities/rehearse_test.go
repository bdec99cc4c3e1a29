package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adoption/activities/fake"
	"adoption/custody"
	"adoption/sockets"
)

// treeHash hashes every path, mode and content under dir.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h.Write([]byte(p + info.Mode().String()))
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	}))
	return hex.EncodeToString(h.Sum(nil))
}

// A rehearsal names each step in order, the port's holder, the marks it
// would add, the file's keys (masked) and the conflict it would be refused
// on, and changes nothing under the node's root or state_dir.
func TestRehearsalNamesEverythingAndChangesNothing(t *testing.T) {
	a, root := newActs(t)
	stateDir := t.TempDir()
	a.Files = custody.New(root, stateDir)
	const p = "/srv/app/settings"
	put(t, root, p, "MODE=prod\nLEVEL=info-s3cret\nPORT=80\n")
	_, err := a.Files.Take(p)
	must(t, err)
	put(t, root, p, "MODE=prod\nLEVEL=debug-s3cret\nPORT=8080\n")
	plan := fileModule(t, a, p, "MODE=stage\nLEVEL=warn-s3cret\nPORT=1\n", []string{"PORT"}, "env")
	plan.Modules[0].Ports = nil
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "tcp", Addr: "0.0.0.0", Port: 8080, PID: 9, Exe: "app"}}}
	before, beforeState := treeHash(t, root), treeHash(t, stateDir)

	r, err := a.Rehearse(context.Background(), ModuleInput{Plan: plan.Ref(), Module: "app"})
	must(t, err)
	var names []string
	for _, s := range r.Steps {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "preflight,open ports,converge files,wait healthy" {
		t.Fatalf("steps %v", names)
	}
	if len(r.Refusals) != 1 || !strings.Contains(r.Refusals[0], p+" LEVEL") {
		t.Fatalf("refusals %v", r.Refusals)
	}
	if len(r.Files) != 1 || strings.Join(r.Files[0].Kept, ",") != "PORT" || r.Files[0].Conflicts[0].Key != "LEVEL" {
		t.Fatalf("files %+v", r.Files)
	}
	if treeHash(t, root) != before || treeHash(t, stateDir) != beforeState {
		t.Fatal("the rehearsal changed the node's files or state_dir")
	}
	raw, err := json.Marshal(r)
	must(t, err)
	b := string(raw)
	if strings.Contains(b, "s3cret") || strings.Contains(b, "stage") {
		t.Fatalf("a value reached the rehearsal: %s", b)
	}
}
