package custody

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func setup(t *testing.T) (root, state string, s *Store) {
	t.Helper()
	root, state = t.TempDir(), filepath.Join(t.TempDir(), "state")
	return root, state, New(root, state)
}

func TestTakeKeepsBytesAndFirstRecord(t *testing.T) {
	root, state, s := setup(t)
	must(t, os.MkdirAll(filepath.Join(root, "etc/ssh"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc/ssh/drop.conf"), []byte("PermitRootLogin no\n"), 0o640))

	r, err := s.Take("/etc/ssh/drop.conf")
	must(t, err)
	if !r.Found || r.Size != 19 || r.Mode != "0640" || len(r.SHA256) != 64 {
		t.Fatalf("record: %+v", r)
	}
	blob, err := s.Blob(r.SHA256)
	must(t, err)
	if string(blob) != "PermitRootLogin no\n" {
		t.Fatalf("blob %q", blob)
	}
	fi, err := os.Stat(filepath.Join(state, "custody", r.SHA256))
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("blob mode %v, want 0600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(state); fi.Mode().Perm() != 0o700 {
		t.Fatalf("state_dir mode %v, want 0700", fi.Mode().Perm())
	}

	// A retried Take after the file changed keeps what was found first.
	must(t, os.WriteFile(filepath.Join(root, "etc/ssh/drop.conf"), []byte("changed"), 0o640))
	r2, err := s.Take("/etc/ssh/drop.conf")
	must(t, err)
	if r2.SHA256 != r.SHA256 {
		t.Fatal("second Take replaced the first record")
	}
	// The file itself is never touched by custody.
	b, _ := os.ReadFile(filepath.Join(root, "etc/ssh/drop.conf"))
	if string(b) != "changed" {
		t.Fatal("Take modified the file")
	}
}

func TestMissingFileIsRecordedAsNotFound(t *testing.T) {
	_, _, s := setup(t)
	r, err := s.Take("/etc/absent")
	must(t, err)
	if r.Found || r.Exists {
		t.Fatalf("record: %+v", r)
	}
	recs, err := s.Records()
	must(t, err)
	if len(recs) != 1 || recs[0].Path != "/etc/absent" {
		t.Fatalf("records: %+v", recs)
	}
}

func TestPathsCannotEscapeRoot(t *testing.T) {
	root, _, s := setup(t)
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")))
	must(t, os.Symlink("../../../../../../"+outside+"/secret", filepath.Join(root, "rel")))

	// A symlink is recorded as a symlink, by its target: nothing behind it
	// is read, wherever it points.
	for _, p := range []string{"/link", "/rel"} {
		st := s.Inspect(p)
		if !st.Exists || st.Link == "" || st.Size != 0 || st.Error != "" {
			t.Errorf("Inspect(%q) = %+v, want a symlink recorded by its target", p, st)
		}
	}
	must(t, os.MkdirAll(filepath.Join(root, "d"), 0o755))
	must(t, os.Symlink(outside, filepath.Join(root, "escape-dir")))
	for _, p := range []string{"/../secret", "relative", "/a/../b", "/link/x", "/escape-dir/secret"} {
		_, err := s.Take(p)
		if err == nil {
			t.Errorf("Take(%q) escaped the node root", p)
		}
		if st := s.Inspect(p); st.Exists || st.Error == "" {
			t.Errorf("Inspect(%q) = %+v, want an error", p, st)
		}
	}
	recs, _ := s.Records()
	if len(recs) != 0 {
		t.Fatalf("refused paths left records: %+v", recs)
	}
	if _, err := s.Blob("../../etc/passwd"); err == nil || !strings.Contains(err.Error(), "not a sha256") {
		t.Fatalf("Blob accepted a path: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestConvergeThenRestoreIsByteIdentical(t *testing.T) {
	root, _, s := setup(t)
	must(t, os.MkdirAll(filepath.Join(root, "srv/mail"), 0o755))
	orig := []byte("RELAY_PASSWORD=found\n")
	must(t, os.WriteFile(filepath.Join(root, "srv/mail/mail.env"), orig, 0o640))
	must(t, os.Chown(filepath.Join(root, "srv/mail/mail.env"), 1234, 5678))
	if _, err := s.Take("/srv/mail/mail.env"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take("/srv/mail/new.conf"); err != nil { // absent when found
		t.Fatal(err)
	}

	must(t, s.Converge("/srv/mail/mail.env", []byte("RELAY_PASSWORD=mesh\n"), 0o600, 0, 0))
	must(t, s.Converge("/srv/mail/new.conf", []byte("x=1\n"), 0o644, 0, 0))
	got, _ := os.ReadFile(filepath.Join(root, "srv/mail/mail.env"))
	fi, _ := os.Stat(filepath.Join(root, "srv/mail/mail.env"))
	if string(got) != "RELAY_PASSWORD=mesh\n" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("converge wrote %q mode %v", got, fi.Mode())
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, "srv/mail/.*adoption-*"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}

	must(t, s.Restore("/srv/mail/mail.env"))
	must(t, s.Restore("/srv/mail/new.conf"))
	got, _ = os.ReadFile(filepath.Join(root, "srv/mail/mail.env"))
	st := s.Inspect("/srv/mail/mail.env")
	if string(got) != string(orig) || st.Mode != "0640" || st.UID != 1234 || st.GID != 5678 {
		t.Fatalf("restore: %q %+v", got, st)
	}
	if _, err := os.Stat(filepath.Join(root, "srv/mail/new.conf")); !os.IsNotExist(err) {
		t.Fatalf("a file absent when found was not removed on restore: %v", err)
	}
	// Restoring twice is harmless.
	must(t, s.Restore("/srv/mail/mail.env"))
}

func TestConvergeCannotEscapeRoot(t *testing.T) {
	root, _, s := setup(t)
	outside := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(root, "escape")))
	if err := s.Converge("/escape/owned", []byte("x"), 0o644, 0, 0); err == nil {
		t.Fatal("converge followed a symlink out of node.root")
	}
	if _, err := os.Stat(filepath.Join(outside, "owned")); !os.IsNotExist(err) {
		t.Fatal("a file was written outside node.root")
	}
	if err := s.Converge("/a/../../b", []byte("x"), 0o644, 0, 0); err == nil {
		t.Fatal("converge accepted '..'")
	}
}

// Inspecting is read-only: the probe must not even create state_dir.
func TestInspectCreatesNothing(t *testing.T) {
	root, state, s := setup(t)
	must(t, os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644))
	if st := s.Inspect("/f"); !st.Exists || st.Size != 1 {
		t.Fatalf("inspect: %+v", st)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("Inspect created state_dir: %v", err)
	}
}

func TestRetakeRecordsTheNewContent(t *testing.T) {
	root, _, s := setup(t)
	p := filepath.Join(root, "f")
	must(t, os.WriteFile(p, []byte("old"), 0o644))
	r1, err := s.Take("/f")
	must(t, err)
	must(t, os.WriteFile(p, []byte("edited by hand"), 0o644))
	r2, err := s.Retake("/f")
	must(t, err)
	if r2.SHA256 == r1.SHA256 || r2.Size != 14 {
		t.Fatalf("retake kept the old record: %+v", r2)
	}
	must(t, os.WriteFile(p, []byte("later"), 0o644))
	must(t, s.Restore("/f"))
	if b, _ := os.ReadFile(p); string(b) != "edited by hand" {
		t.Fatalf("restore after retake gave %q", b)
	}
}
