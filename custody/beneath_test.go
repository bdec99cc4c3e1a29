package custody

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestIntermediateSymlinkCannotRedirect: a link in an intermediate
// directory, whether it stays inside node.root (conf -> ../../etc/cron.d,
// what os.Root follows) or leaves it, is refused for reading, converging
// and restoring, and nothing is written where it points.
func TestIntermediateSymlinkCannotRedirect(t *testing.T) {
	root, _, s := setup(t)
	outside := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "etc/cron.d"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "srv/app"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "srv/out"), 0o755))
	must(t, os.Symlink("../../etc/cron.d", filepath.Join(root, "srv/app/conf"))) // stays inside the root
	must(t, os.Symlink(outside, filepath.Join(root, "srv/out/conf")))            // leaves it
	must(t, os.Symlink("../../../../../../../../"+outside, filepath.Join(root, "srv/out/rel")))
	for p, link := range map[string]string{
		"/srv/app/conf/job":   "/srv/app/conf is a symlink (-> ../../etc/cron.d)",
		"/srv/out/conf/job":   "/srv/out/conf is a symlink (-> " + outside + ")",
		"/srv/out/rel/job":    "/srv/out/rel is a symlink",
		"/srv/app/conf/x/job": "/srv/app/conf is a symlink",
	} {
		if _, err := s.Take(p); err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "Declare the path the link leads to") {
			t.Errorf("Take(%s): %v, want a refusal naming %q and what to do", p, err, link)
		}
		if err := s.Converge(p, []byte("* * * * * root sh -c 'owned'\n"), 0o644, 0, 0); err == nil || !strings.Contains(err.Error(), link) {
			t.Errorf("Converge(%s): %v, want a refusal naming %q", p, err, link)
		}
		if st := s.Inspect(p); st.Exists || !strings.Contains(st.Error, link) {
			t.Errorf("Inspect(%s) = %+v", p, st)
		}
	}
	for _, f := range []string{filepath.Join(root, "etc/cron.d/job"), filepath.Join(outside, "job"), filepath.Join(root, "etc/cron.d/x")} {
		if _, err := os.Lstat(f); !os.IsNotExist(err) {
			t.Errorf("%s was written through a symlink: %v", f, err)
		}
	}

	// A link planted after adoption, in place of a directory that was
	// real then, stops the restore too.
	must(t, os.MkdirAll(filepath.Join(root, "srv/web/conf"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "srv/web/conf/job"), []byte("found\n"), 0o644))
	_, err := s.Take("/srv/web/conf/job")
	must(t, err)
	must(t, os.RemoveAll(filepath.Join(root, "srv/web/conf")))
	must(t, os.Symlink("../../etc/cron.d", filepath.Join(root, "srv/web/conf")))
	if err := s.Restore("/srv/web/conf/job"); err == nil || !strings.Contains(err.Error(), "/srv/web/conf is a symlink") {
		t.Fatalf("Restore through a planted link: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/cron.d/job")); !os.IsNotExist(err) {
		t.Fatalf("restore wrote through the planted link: %v", err)
	}
	// A file absent when found is not removed through a link either.
	must(t, os.WriteFile(filepath.Join(root, "etc/cron.d/keep"), []byte("keep\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "srv/gone"), 0o755))
	_, err = s.Take("/srv/gone/keep")
	must(t, err)
	must(t, os.Remove(filepath.Join(root, "srv/gone")))
	must(t, os.Symlink("../etc/cron.d", filepath.Join(root, "srv/gone")))
	if err := s.Restore("/srv/gone/keep"); err == nil || !strings.Contains(err.Error(), "/srv/gone is a symlink") {
		t.Fatalf("Restore (remove) through a planted link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/cron.d/keep")); err != nil {
		t.Fatalf("restore removed a file through a link: %v", err)
	}
}

// TestNodeRootSlash: the same with node.root at / itself, as production
// runs it: a relative link inside a directory on the host cannot redirect
// a write, and a path with no link converges and restores.
func TestNodeRootSlash(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	s := New("/", filepath.Join(t.TempDir(), "state"))
	must(t, os.MkdirAll(filepath.Join(base, "etc/cron.d"), 0o755))
	must(t, os.MkdirAll(filepath.Join(base, "srv/app"), 0o755))
	must(t, os.Symlink("../../etc/cron.d", filepath.Join(base, "srv/app/conf")))
	p := filepath.Join(base, "srv/app/conf/job")
	if err := s.Converge(p, []byte("* * * * * root owned\n"), 0o644, os.Getuid(), os.Getgid()); err == nil || !strings.Contains(err.Error(), "srv/app/conf is a symlink (-> ../../etc/cron.d) under node.root /") {
		t.Fatalf("Converge(%s) with node.root /: %v", p, err)
	}
	if _, err := os.Lstat(filepath.Join(base, "etc/cron.d/job")); !os.IsNotExist(err) {
		t.Fatalf("a write under node.root / followed a relative link into etc/cron.d: %v", err)
	}
	real := filepath.Join(base, "srv/app/real.conf")
	must(t, os.WriteFile(real, []byte("found\n"), 0o640))
	_, err = s.Take(real)
	must(t, err)
	must(t, s.Converge(real, []byte("mesh\n"), 0o600, os.Getuid(), os.Getgid()))
	must(t, s.Restore(real))
	if b, _ := os.ReadFile(real); string(b) != "found\n" {
		t.Fatalf("restore under node.root /: %q", b)
	}
}

// TestReadFileRefusesNonFiles: ReadFile (a module's env_file) refuses a
// FIFO within a bounded time (it must not wait for a writer), a device,
// a symlink and a file above the limit, each with a reason.
func TestReadFileRefusesNonFiles(t *testing.T) {
	root := t.TempDir()
	must(t, unix.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	must(t, os.Symlink("/dev/zero", filepath.Join(root, "zero-link")))
	big, err := os.Create(filepath.Join(root, "big"))
	must(t, err)
	must(t, big.Truncate(4097))
	big.Close()
	must(t, os.WriteFile(filepath.Join(root, "ok.env"), []byte("A=1\n"), 0o600))
	cases := []struct{ root, path, want string }{
		{root, "/fifo", "is a FIFO, not a regular file"},
		{"/", "/dev/zero", "is a character device, not a regular file"},
		{root, "/zero-link", "is a symlink"},
		{root, "/big", "above custody's limit of 4096"},
		{root, "/absent", "does not exist"},
	}
	for _, c := range cases {
		done := make(chan error, 1)
		go func() {
			_, err := ReadFile(c.root, c.path, 4096)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ReadFile(%s, %s): %v, want %q", c.root, c.path, err, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadFile(%s, %s) still blocked after 5 s", c.root, c.path)
		}
	}
	if b, err := ReadFile(root, "/ok.env", 4096); err != nil || string(b) != "A=1\n" {
		t.Fatalf("ReadFile of a regular file: %q, %v", b, err)
	}
}
