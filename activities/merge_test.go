package activities

import (
	"context"
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
)

// fileModule is a module of the node's own configuration declaring one file
// with the given mesh content, keep list and format.
func fileModule(t *testing.T, a *Activities, path, mesh string, keep []string, format string) config.Plan {
	t.Helper()
	sum := sha256.Sum256([]byte(mesh))
	h := hex.EncodeToString(sum[:])
	plan := config.Plan{Node: "n1", Modules: []config.ModulePlan{{Name: "app",
		Files: []config.FilePlan{{Path: path, SHA256: h, Keep: keep, Format: format}}}}}
	a.Local = authority.Fixed(plan, map[string][]byte{h: []byte(mesh)}, 30*time.Minute)
	return plan
}

func put(t *testing.T, root, path, content string) {
	t.Helper()
	p := filepath.Join(root, path)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o600))
}

func read(t *testing.T, root, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	must(t, err)
	return string(b)
}

// An sshd drop-in's Port and AllowUsers survive convergence while the
// mesh's PasswordAuthentication lands.
func TestConvergeKeepsLoadBearingKeys(t *testing.T) {
	a, root := newActs(t)
	const p = "/etc/ssh/sshd_config.d/10-site.conf"
	put(t, root, p, "Port 2222\nAllowUsers ops deploy\nPasswordAuthentication yes\n")
	_, err := a.Files.Take(p)
	must(t, err)
	plan := fileModule(t, a, p, "PasswordAuthentication no\nPort 22\n", []string{"Port", "AllowUsers"}, "")
	in := ModuleInput{Plan: plan.Ref(), Module: "app"}
	_, err = a.CutoverPreflight(context.Background(), in)
	must(t, err)
	_, err = a.ConvergeFiles(context.Background(), in)
	must(t, err)
	got := read(t, root, p)
	if got != "PasswordAuthentication no\nPort 2222\nAllowUsers ops deploy\n" {
		t.Fatalf("converged to %q", got)
	}
	// Converging again (a resumed step) changes nothing.
	_, err = a.ConvergeFiles(context.Background(), in)
	must(t, err)
	if again := read(t, root, p); again != got {
		t.Fatalf("second converge wrote %q", again)
	}
}

// An env file changed on the node after custody and set otherwise by the
// mesh refuses the cutover by path and key, writes nothing, and names no
// value; a decision settles it.
func TestConflictRefusesThenDecisionSettles(t *testing.T) {
	a, root := newActs(t)
	const p = "/srv/app/settings"
	put(t, root, p, "MODE=prod\nLEVEL=info-hunter2\n")
	_, err := a.Files.Take(p)
	must(t, err)
	put(t, root, p, "MODE=prod\nLEVEL=debug-hunter2\n") // the node's change after custody
	plan := fileModule(t, a, p, "MODE=prod\nLEVEL=warn-hunter2\n", nil, "env")
	in := ModuleInput{Plan: plan.Ref(), Module: "app"}

	for name, step := range map[string]func(context.Context, ModuleInput) (*CutoverResult, error){
		"preflight": a.CutoverPreflight, "converge": a.ConvergeFiles,
	} {
		_, err = step(context.Background(), in)
		msg := appErr(t, err, ErrFileConflict)
		if !strings.Contains(msg, p+" LEVEL") || !strings.Contains(msg, "adopt resolve n1") || strings.Contains(msg, "hunter2") {
			t.Fatalf("%s refusal: %s", name, msg)
		}
		var ae *temporal.ApplicationError
		errors.As(err, &ae)
		var cs []FileConflict
		if ae.Details(&cs) != nil || len(cs) != 1 || cs[0].Key != "LEVEL" || cs[0].Path != p {
			t.Fatalf("%s details: %+v", name, cs)
		}
		if got := read(t, root, p); got != "MODE=prod\nLEVEL=debug-hunter2\n" {
			t.Fatalf("%s wrote %q", name, got)
		}
	}

	in.Decisions = []FileDecision{{Path: p, Key: "LEVEL", Take: "mesh"}}
	_, err = a.CutoverPreflight(context.Background(), in)
	must(t, err)
	_, err = a.ConvergeFiles(context.Background(), in)
	must(t, err)
	if got := read(t, root, p); got != "MODE=prod\nLEVEL=warn-hunter2\n" {
		t.Fatalf("take mesh wrote %q", got)
	}

	in.Decisions = []FileDecision{{Path: p, Key: "LEVEL", Take: "both"}}
	_, err = a.CutoverPreflight(context.Background(), in)
	appErr(t, err, authority.ErrNotDeclared)
}
