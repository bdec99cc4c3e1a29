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

	for _, p := range []string{"/link", "/rel", "/../secret", "relative", "/a/../b"} {
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
