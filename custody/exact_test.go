package custody

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSymlinkRoundTrip: /etc/resolv.conf is a symlink on most hosts. It is
// recorded as one, converging replaces the link (not its target), and
// restoring puts the link back, with its owner.
func TestSymlinkRoundTrip(t *testing.T) {
	root, _, s := setup(t)
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "run/resolve"), 0o755))
	target := filepath.Join(root, "run/resolve/stub.conf")
	must(t, os.WriteFile(target, []byte("nameserver 127.0.0.53\n"), 0o644))
	must(t, os.Symlink("../run/resolve/stub.conf", filepath.Join(root, "etc/resolv.conf")))
	if os.Geteuid() == 0 {
		must(t, os.Lchown(filepath.Join(root, "etc/resolv.conf"), 1234, 5678))
	}
	rec, err := s.Take("/etc/resolv.conf")
	must(t, err)
	if !rec.Found || rec.Link != "../run/resolve/stub.conf" || rec.Size != 0 {
		t.Fatalf("record: %+v", rec)
	}
	must(t, s.Converge("/etc/resolv.conf", []byte("nameserver 10.0.0.1\n"), 0o644, 0, 0))
	if fi, err := os.Lstat(filepath.Join(root, "etc/resolv.conf")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("converge left %v, %v; want a regular file", fi, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "nameserver 127.0.0.53\n" {
		t.Fatalf("converge wrote through the symlink into its target: %q", b)
	}
	must(t, s.Restore("/etc/resolv.conf"))
	got, err := os.Readlink(filepath.Join(root, "etc/resolv.conf"))
	if err != nil || got != "../run/resolve/stub.conf" {
		t.Fatalf("restore: readlink = %q, %v; want the symlink back", got, err)
	}
	if st := s.Inspect("/etc/resolv.conf"); st.Link != rec.Link || st.UID != rec.UID || st.GID != rec.GID || st.SHA256 != rec.SHA256 {
		t.Fatalf("restored %+v, recorded %+v", st, rec)
	}
	must(t, s.Restore("/etc/resolv.conf")) // idempotent
}

// TestSetuidRoundTrip: set-id and sticky bits are recorded and restored
// exactly; a converge asked for 4755 writes 4755.
func TestSetuidRoundTrip(t *testing.T) {
	root, _, s := setup(t)
	p := filepath.Join(root, "tool")
	must(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Chmod(p, 0o755|os.ModeSetuid|os.ModeSetgid))
	fi, _ := os.Stat(p)
	if fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("the filesystem under %s does not keep setuid bits (%v): this test cannot prove anything there", root, fi.Mode())
	}
	rec, err := s.Take("/tool")
	must(t, err)
	if rec.Mode != "6755" {
		t.Fatalf("recorded mode %q, want 6755", rec.Mode)
	}
	must(t, s.Converge("/tool", []byte("mesh\n"), 0o700|os.ModeSticky, os.Getuid(), os.Getgid()))
	if fi, _ := os.Stat(p); fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("converged mode %v, want 1700", fi.Mode())
	}
	must(t, s.Restore("/tool"))
	fi, _ = os.Stat(p)
	if fi.Mode()&os.ModeSetuid == 0 || fi.Mode()&os.ModeSetgid == 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("restored mode %v, want 6755", fi.Mode())
	}
	if st := s.Inspect("/tool"); st.Mode != "6755" {
		t.Fatalf("inspect after restore: %+v", st)
	}
}

// TestNonFilesRefusedWithoutBlocking: a FIFO (whose open would block a
// reader until a writer came), a socket, a directory and a huge file are
// refused with a reason, at once.
func TestNonFilesRefusedWithoutBlocking(t *testing.T) {
	root, _, s := setup(t)
	must(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(root, "sock"))
	must(t, err)
	defer l.Close()
	must(t, os.Mkdir(filepath.Join(root, "dir"), 0o755))
	huge, err := os.Create(filepath.Join(root, "huge"))
	must(t, err)
	must(t, huge.Truncate(MaxFileSize+1)) // sparse: no disk used
	huge.Close()
	for p, want := range map[string]string{"/fifo": "is a FIFO", "/sock": "is a socket", "/dir": "is a directory", "/huge": "above custody's limit"} {
		done := make(chan error, 1)
		go func() {
			_, err := s.Take(p)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Take(%s): %v, want an error saying %q", p, err, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("Take(%s) blocked", p)
		}
		if st := s.Inspect(p); st.Exists || !strings.Contains(st.Error, want) {
			t.Errorf("Inspect(%s) = %+v", p, st)
		}
	}
	if recs, _ := s.Records(); len(recs) != 0 {
		t.Fatalf("refused paths left records: %+v", recs)
	}
}

// TestDigestIsKeyed: the hash that goes to a workflow history is an HMAC
// with the node's key (0600, created once, kept), not the plain sha256 a
// guess could be checked against.
func TestDigestIsKeyed(t *testing.T) {
	root, state, s := setup(t)
	must(t, os.WriteFile(filepath.Join(root, "pw"), []byte("hunter2"), 0o600))
	if st := s.Inspect("/pw"); st.Digest != "" {
		t.Fatalf("a digest without a key: %+v", st)
	}
	rec, err := s.Take("/pw")
	must(t, err)
	plain := sha256.Sum256([]byte("hunter2"))
	if rec.SHA256 != hex.EncodeToString(plain[:]) || !strings.HasPrefix(rec.Digest, "hmac-sha256:") || strings.Contains(rec.Digest, rec.SHA256) {
		t.Fatalf("record %+v", rec)
	}
	if pub := rec.Public(); pub.SHA256 != "" || pub.Digest != rec.Digest {
		t.Fatalf("Public kept the plain hash: %+v", pub)
	}
	fi, err := os.Stat(filepath.Join(state, "custody.key"))
	must(t, err)
	if fi.Mode().Perm() != 0o600 || fi.Size() != keyLen {
		t.Fatalf("key file %v, %d bytes", fi.Mode(), fi.Size())
	}
	again := New(root, state)
	must(t, again.EnsureKey())
	if again.Inspect("/pw").Digest != rec.Digest || again.Digest([]byte("hunter2")) != rec.Digest {
		t.Fatal("the key changed: digests recorded before are not comparable any more")
	}
	other := New(root, filepath.Join(t.TempDir(), "state"))
	must(t, other.EnsureKey())
	if other.Inspect("/pw").Digest == rec.Digest {
		t.Fatal("two nodes share a digest: the key is not per node")
	}
}
