package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/activities/authority"
	"adoption/activities/fake"
	"adoption/config"
	"adoption/containers/cutover"
)

// windowEngine is the engine's swap and rollback as far as the files go:
// it says what each instance would read at its stop and at its start.
type windowEngine struct {
	fake.Cutover
	root, path string
	log        []string
}

func (w *windowEngine) saw(who string) {
	b, err := os.ReadFile(filepath.Join(w.root, w.path))
	if err != nil {
		b = []byte("(absent)")
	}
	w.log = append(w.log, who+": "+string(b))
}

func (w *windowEngine) Swap(ctx context.Context, _ string, _ time.Duration) error {
	w.saw("predecessor stops")
	if err := cutover.RunWindow(ctx); err != nil {
		return err
	}
	w.saw("new starts")
	return nil
}

func (w *windowEngine) Rollback(ctx context.Context, _ string) error {
	w.saw("new stops")
	if err := cutover.RunWindow(ctx); err != nil {
		return err
	}
	w.saw("predecessor starts")
	return nil
}

// containerFileModule is a module with a container and one declared file
// whose mesh content is mesh.
func containerFileModule(a *Activities, path, mesh string) config.Plan {
	sum := sha256.Sum256([]byte(mesh))
	h := hex.EncodeToString(sum[:])
	plan := config.Plan{Node: "n1", Modules: []config.ModulePlan{{Name: "app",
		Container: &config.Container{Name: "app", Image: "app:2"},
		Files:     []config.FilePlan{{Path: path, SHA256: h}}}}}
	a.Local = authority.Fixed(plan, map[string][]byte{h: []byte(mesh)}, 30*time.Minute)
	return plan
}

// A container module's file converges inside the swap's window: the
// predecessor stops on the file it found, the new container starts on the
// mesh's; a rollback puts the found file back, byte for byte and with its
// mode, before the predecessor starts again. The swap resumed converges
// again to the same bytes.
func TestFilesConvergeInsideTheSwap(t *testing.T) {
	a, root := newActs(t)
	const p = "/etc/ssh/sshd_config.d/10-site.conf"
	found := "Port 2222\n# the predecessor's, with a trailing space \nAllowUsers ops\x00\n"
	put(t, root, p, found)
	must(t, os.Chmod(filepath.Join(root, p), 0o640))
	_, err := a.Files.Take(p)
	must(t, err)
	eng := &windowEngine{root: root, path: p}
	a.Cutover = eng
	plan := containerFileModule(a, p, "PasswordAuthentication no\n")
	in := ModuleInput{Plan: plan.Ref(), Module: "app"}

	res, err := a.CutoverSwap(context.Background(), in)
	must(t, err)
	want := []string{"predecessor stops: " + found, "new starts: PasswordAuthentication no\n"}
	if strings.Join(eng.log, "|") != strings.Join(want, "|") {
		t.Fatalf("the swap:\n got %q\nwant %q", eng.log, want)
	}
	if strings.Join(res.Files, ",") != p {
		t.Fatalf("the swap says it converged %v", res.Files)
	}
	// Resumed (the activity retried): the same bytes again.
	eng.log = nil
	_, err = a.CutoverSwap(context.Background(), in)
	must(t, err)
	if eng.log[1] != "new starts: PasswordAuthentication no\n" {
		t.Fatalf("a resumed swap: %q", eng.log)
	}

	eng.log = nil
	rb, err := a.CutoverRollback(context.Background(), in)
	must(t, err)
	want = []string{"new stops: PasswordAuthentication no\n", "predecessor starts: " + found}
	if strings.Join(eng.log, "|") != strings.Join(want, "|") {
		t.Fatalf("the rollback:\n got %q\nwant %q", eng.log, want)
	}
	if strings.Join(rb.Files, ",") != p {
		t.Fatalf("the rollback says it restored %v", rb.Files)
	}
	fi, err := os.Stat(filepath.Join(root, p))
	must(t, err)
	if read(t, root, p) != found || fi.Mode().Perm() != 0o640 {
		t.Fatalf("after the rollback: %q mode %v, want the found bytes and 0640", read(t, root, p), fi.Mode().Perm())
	}
}

// A file whose key conflicts refuses the swap before the predecessor
// stops: the engine is never asked, the file is as found.
func TestSwapRefusesAConflictBeforeTheStop(t *testing.T) {
	a, root := newActs(t)
	const p = "/srv/app/settings"
	put(t, root, p, "LEVEL=info\n")
	_, err := a.Files.Take(p)
	must(t, err)
	put(t, root, p, "LEVEL=debug\n") // changed on the node since custody
	eng := &windowEngine{root: root, path: p}
	a.Cutover = eng
	plan := containerFileModule(a, p, "LEVEL=warn\n")
	plan.Modules[0].Files[0].Format = "env"
	a.Local = authority.Fixed(plan, map[string][]byte{plan.Modules[0].Files[0].SHA256: []byte("LEVEL=warn\n")}, 30*time.Minute)
	_, err = a.CutoverSwap(context.Background(), ModuleInput{Plan: plan.Ref(), Module: "app"})
	appErr(t, err, ErrFileConflict)
	if len(eng.log) != 0 || read(t, root, p) != "LEVEL=debug\n" {
		t.Fatalf("a refused swap: engine %q, file %q", eng.log, read(t, root, p))
	}
}

// The rehearsal of a container module shows the files between the
// predecessor's stop and the new container's start.
func TestRehearsalShowsFilesInsideTheSwap(t *testing.T) {
	a, root := newActs(t)
	const p = "/srv/app/app.env"
	put(t, root, p, "A=1\n")
	plan := containerFileModule(a, p, "A=2\n")
	a.Cutover = fake.Cutover{}
	r, err := a.Rehearse(context.Background(), ModuleInput{Plan: plan.Ref(), Module: "app"})
	must(t, err)
	var names []string
	for _, s := range r.Steps {
		names = append(names, s.Name)
	}
	want := "preflight,open ports,create container,swap: stop the predecessor,swap: converge files (neither the predecessor nor the new container runs),swap: start the new container,wait healthy"
	if strings.Join(names, ",") != want {
		t.Fatalf("steps:\n got %s\nwant %s", strings.Join(names, ","), want)
	}
}
