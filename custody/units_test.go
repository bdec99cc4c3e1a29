package custody

// Restores checked exact against the kernel (an oracle that does not use
// custody's own reading), in this process and in a child limited by
// setpriv(1) to the capabilities the systemd units grant.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"adoption/internal/testenv"
)

// childEnv makes the test binary a restoring child (see TestMain).
const childEnv = "ADOPT_CUSTODY_RESTORE_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(restoreChild(spec))
	}
	os.Exit(m.Run())
}

// restoreChild restores each path of spec (root, state_dir, paths, tab
// separated) and prints its effective capabilities and, per path, "ok" or
// "refused" with the error.
func restoreChild(spec string) int {
	f := strings.Split(spec, "\t")
	if len(f) < 3 {
		fmt.Println("bad spec")
		return 2
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "CapBnd:") || strings.HasPrefix(l, "NoNewPrivs:") {
			fmt.Println(strings.Join(strings.Fields(l), " "))
		}
	}
	s := New(f[0], f[1])
	if f[2] == "hostile" {
		hostile(s, f[0])
		return 0
	}
	for _, p := range f[2:] {
		if err := s.Restore(p); err != nil {
			fmt.Printf("refused %s: %v\n", p, err)
		} else {
			fmt.Printf("ok %s\n", p)
		}
	}
	return 0
}

// hostile runs, in the child, what must be refused whatever the agent's
// capabilities: a converge through an intermediate link that stays inside
// the root, a FIFO and /dev/zero (node.root /) as env_file, each with at
// most 5 s to answer. It prints "refused <what>: <error>", or "ok <what>"
// when nothing was refused.
func hostile(s *Store, root string) {
	try := func(what string, f func() error) {
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err != nil {
				fmt.Printf("refused %s: %v\n", what, err)
			} else {
				fmt.Printf("ok %s\n", what)
			}
		case <-time.After(5 * time.Second):
			fmt.Printf("blocked %s\n", what)
		}
	}
	try("converge-through-link", func() error {
		return s.Converge("/srv/app/conf/job", []byte("* * * * * root owned\n"), 0o644, 0, 0)
	})
	try("env-fifo", func() error { _, err := ReadFile(root, "/srv/fifo.env", 1<<20); return err })
	try("env-dev-zero", func() error { _, err := ReadFile("/", "/dev/zero", 1<<20); return err })
}

// snapshot is a file as the kernel reports it, read without custody.
type snapshot struct {
	Content  string
	Mode     uint32 // st_mode: type, set-id, sticky, permissions
	UID, GID uint32
	Xattrs   map[string]string
}

func snap(t *testing.T, p string) snapshot {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	b, err := os.ReadFile(p)
	must(t, err)
	x := map[string]string{}
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	must(t, err)
	for _, name := range strings.Split(string(bytes.TrimRight(buf[:n], "\x00")), "\x00") {
		if name == "" {
			continue
		}
		v := make([]byte, 64<<10)
		m, err := unix.Lgetxattr(p, name, v)
		must(t, err)
		x[name] = string(v[:m])
	}
	return snapshot{Content: string(b), Mode: st.Mode, UID: st.Uid, GID: st.Gid, Xattrs: x}
}

// acl encodes a POSIX ACL as the kernel's system.posix_acl_* xattr.
func acl(entries ...[3]uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

const (
	aclUserObj, aclUser, aclGroupObj, aclMask, aclOther = 0x01, 0x02, 0x04, 0x10, 0x20
	aclNoID                                             = 0xffffffff
)

// fcap encodes file capabilities (VFS_CAP_REVISION_2, effective) as
// security.capability.
func fcap(caps ...int) []byte {
	var perm [2]uint32
	for _, c := range caps {
		perm[c/32] |= 1 << (uint(c) % 32)
	}
	b := binary.LittleEndian.AppendUint32(nil, 0x02000001)
	for i := range 2 {
		b = binary.LittleEndian.AppendUint32(b, perm[i])
		b = binary.LittleEndian.AppendUint32(b, 0)
	}
	return b
}

// found lays out what a node could hold: a setuid+setgid tool with file
// capabilities and a trusted attribute, in a group not root's; a setgid
// file with a POSIX ACL and a user attribute; a plain file in a directory
// whose default ACL a new file would inherit. It returns the paths and
// their snapshots as found.
func found(t *testing.T, root string) ([]string, map[string]snapshot) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(root, "usr/local/bin"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "srv/app"), 0o755))
	tool := filepath.Join(root, "usr/local/bin/tool")
	must(t, os.WriteFile(tool, []byte("#!/bin/sh\necho tool\n"), 0o755))
	must(t, os.Chown(tool, 1234, 5678))
	must(t, os.Chmod(tool, 0o755|os.ModeSetuid|os.ModeSetgid))
	must(t, unix.Setxattr(tool, "security.capability", fcap(unix.CAP_NET_RAW, unix.CAP_NET_BIND_SERVICE), 0))
	must(t, unix.Setxattr(tool, "trusted.origin", []byte("vendor"), 0))

	shared := filepath.Join(root, "srv/app/shared.conf")
	must(t, os.WriteFile(shared, []byte("token=found\n"), 0o640))
	must(t, os.Chown(shared, 1234, 5678))
	must(t, os.Chmod(shared, 0o640|os.ModeSetgid))
	must(t, unix.Setxattr(shared, "system.posix_acl_access", acl(
		[3]uint32{aclUserObj, 6, aclNoID}, [3]uint32{aclUser, 4, 4321}, [3]uint32{aclGroupObj, 4, aclNoID},
		[3]uint32{aclMask, 4, aclNoID}, [3]uint32{aclOther, 0, aclNoID}), 0))
	must(t, unix.Setxattr(shared, "user.owner-note", []byte("ops"), 0))

	plain := filepath.Join(root, "srv/app/plain.conf")
	must(t, os.WriteFile(plain, []byte("plain=1\n"), 0o644))
	// Set after plain.conf exists: every temporary file written in
	// srv/app from now on inherits an access ACL it must not keep.
	must(t, unix.Setxattr(filepath.Join(root, "srv/app"), "system.posix_acl_default", acl(
		[3]uint32{aclUserObj, 7, aclNoID}, [3]uint32{aclUser, 7, 4321}, [3]uint32{aclGroupObj, 5, aclNoID},
		[3]uint32{aclMask, 7, aclNoID}, [3]uint32{aclOther, 5, aclNoID}), 0))

	paths := []string{"/usr/local/bin/tool", "/srv/app/shared.conf", "/srv/app/plain.conf"}
	want := map[string]snapshot{}
	for _, p := range paths {
		want[p] = snap(t, filepath.Join(root, p))
	}
	if want["/usr/local/bin/tool"].Mode&(unix.S_ISUID|unix.S_ISGID) != unix.S_ISUID|unix.S_ISGID || len(want["/usr/local/bin/tool"].Xattrs) != 2 ||
		want["/srv/app/shared.conf"].Mode&unix.S_ISGID == 0 || len(want["/srv/app/shared.conf"].Xattrs) != 2 {
		t.Fatalf("the filesystem under %s did not keep the fixture as set (%+v): this test cannot prove anything there", root, want)
	}
	return paths, want
}

// takeAndConverge takes each path into custody and converges the mesh's
// content over it, so a restore has everything to put back.
func takeAndConverge(t *testing.T, s *Store, root string, paths []string) map[string]snapshot {
	t.Helper()
	mesh := map[string]snapshot{}
	for _, p := range paths {
		rec, err := s.Take(p)
		must(t, err)
		if p != "/srv/app/plain.conf" && (rec.Xattrs == "" || rec.XattrSHA256 == "") {
			t.Fatalf("%s recorded without its extended attributes: %+v", p, rec)
		}
		if pub := rec.Public(); pub.XattrSHA256 != "" || pub.SHA256 != "" || pub.Xattrs != rec.Xattrs {
			t.Fatalf("Public kept a plain hash: %+v", pub)
		}
		must(t, s.Converge(p, []byte("mesh of "+p+"\n"), 0o644, 0, 0))
		mesh[p] = snap(t, filepath.Join(root, p))
	}
	return mesh
}

// TestRestoreExactXattrs: in this process (all of root's capabilities),
// setuid and setgid bits, file capabilities, a trusted attribute, a POSIX
// ACL and a user attribute come back byte for byte, and an ACL inherited
// from the directory's default ACL does not stay on a file that had none.
func TestRestoreExactXattrs(t *testing.T) {
	testenv.NeedRoot(t, "file capabilities, trusted.* attributes and chown to other users")
	root, _, s := setup(t)
	paths, want := found(t, root)
	mesh := takeAndConverge(t, s, root, paths)
	if len(mesh["/srv/app/plain.conf"].Xattrs) == 0 {
		t.Fatalf("the converged file did not inherit the directory's default ACL (%+v): the test would not show its removal", mesh["/srv/app/plain.conf"])
	}
	for _, p := range paths {
		must(t, s.Restore(p))
		if got := snap(t, filepath.Join(root, p)); !reflect.DeepEqual(got, want[p]) {
			t.Errorf("%s restored as %+v\nfound as %+v", p, got, want[p])
		}
		must(t, s.Restore(p)) // idempotent
	}
}

// unitCaps reads CapabilityBoundingSet from a unit file in deploy/systemd.
func unitCaps(t *testing.T, unit string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "deploy", "systemd", unit))
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "CapabilityBoundingSet="); ok {
			return strings.Fields(v)
		}
	}
	t.Fatalf("%s has no CapabilityBoundingSet=", unit)
	return nil
}

// capNumbers maps the capabilities the units may name to their numbers.
var capNumbers = map[string]int{
	"CAP_CHOWN": unix.CAP_CHOWN, "CAP_DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "CAP_DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH,
	"CAP_FOWNER": unix.CAP_FOWNER, "CAP_FSETID": unix.CAP_FSETID, "CAP_SETFCAP": unix.CAP_SETFCAP,
	"CAP_NET_ADMIN": unix.CAP_NET_ADMIN, "CAP_NET_RAW": unix.CAP_NET_RAW, "CAP_NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE,
	"CAP_SYS_ADMIN": unix.CAP_SYS_ADMIN, "CAP_SYS_PTRACE": unix.CAP_SYS_PTRACE,
}

// restoreUnder runs the restore of paths in a child of this test binary
// whose capabilities are caps and nothing else, as systemd starts a
// User=root unit with CapabilityBoundingSet=caps and NoNewPrivileges=yes,
// and returns the child's report, path by path.
func restoreUnder(t *testing.T, caps []string, root, state string, paths []string) map[string]string {
	t.Helper()
	return runUnder(t, caps, append([]string{root, state}, paths...), len(paths))
}

// runUnder runs the child with spec under caps and returns its report by
// path (or by name, for the hostile checks), expecting n lines of it.
func runUnder(t *testing.T, caps []string, spec []string, n int) map[string]string {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv is missing (util-linux: apt-get install -y util-linux): the restore cannot be run under the units' capability set: %v", err)
	}
	var mask uint64
	set := []string{"-all"}
	for _, c := range caps {
		n, ok := capNumbers[c]
		if !ok {
			t.Fatalf("capability %s of the unit is not known to this test: add it to capNumbers", c)
		}
		mask |= 1 << uint(n)
		set = append(set, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	exe, err := os.Executable()
	must(t, err)
	cmd := exec.Command(setpriv, "--no-new-privs", "--bounding-set", strings.Join(set, ","), "--inh-caps", "-all", "--ambient-caps", "-all", "--", exe)
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(spec, "\t"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	report := map[string]string{}
	wantEff := fmt.Sprintf("CapEff: %016x", mask)
	var sawEff bool
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case strings.HasPrefix(l, "CapEff:"):
			sawEff = true
			if l != wantEff {
				t.Fatalf("the child ran with %s, want %s (the unit's %s)", l, wantEff, strings.Join(caps, " "))
			}
		case strings.HasPrefix(l, "ok "):
			report[strings.TrimPrefix(l, "ok ")] = "ok"
		case strings.HasPrefix(l, "refused "):
			p, why, _ := strings.Cut(strings.TrimPrefix(l, "refused "), ": ")
			report[p] = why
		case strings.HasPrefix(l, "blocked "):
			report[strings.TrimPrefix(l, "blocked ")] = "blocked"
		}
	}
	if !sawEff || len(report) != n {
		t.Fatalf("the child's report is incomplete:\n%s", out)
	}
	t.Logf("child under %s:\n%s", strings.Join(caps, " "), out)
	return report
}

// TestHostilePathsUnderTheAgentsCapabilities: under the agent unit's
// capabilities (CAP_DAC_OVERRIDE and CAP_SYS_ADMIN among them, which get
// past permissions but not past openat2's resolve flags) a link in an
// intermediate directory cannot redirect a converge, and a FIFO or
// /dev/zero as env_file is refused within 5 s.
func TestHostilePathsUnderTheAgentsCapabilities(t *testing.T) {
	testenv.NeedRoot(t, "setpriv drops capabilities from root's")
	root, state, _ := setup(t)
	must(t, os.MkdirAll(filepath.Join(root, "etc/cron.d"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "srv/app"), 0o755))
	must(t, os.Symlink("../../etc/cron.d", filepath.Join(root, "srv/app/conf")))
	must(t, unix.Mkfifo(filepath.Join(root, "srv/fifo.env"), 0o600))
	report := runUnder(t, unitCaps(t, "adopt-agent.service"), []string{root, state, "hostile"}, 3)
	for what, want := range map[string]string{
		"converge-through-link": "/srv/app/conf is a symlink (-> ../../etc/cron.d)",
		"env-fifo":              "is a FIFO, not a regular file",
		"env-dev-zero":          "is a character device, not a regular file",
	} {
		if !strings.Contains(report[what], want) {
			t.Errorf("%s: %q, want a refusal saying %q", what, report[what], want)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/cron.d/job")); !os.IsNotExist(err) {
		t.Fatalf("the converge wrote through the link: %v", err)
	}
}

// TestRestoreExactUnderTheUnitsCapabilities: the restore the agent and the
// watchdog run is exact under the capabilities their units grant, and
// without CAP_FSETID or CAP_SETFCAP it is refused by name, leaving the
// path as it was (not restored in part).
func TestRestoreExactUnderTheUnitsCapabilities(t *testing.T) {
	testenv.NeedRoot(t, "setpriv drops capabilities from root's; the fixture chowns to other users")
	without := func(caps []string, drop string) []string {
		var out []string
		for _, c := range caps {
			if c != drop {
				out = append(out, c)
			}
		}
		return out
	}
	agent := unitCaps(t, "adopt-agent.service")
	cases := []struct {
		name    string
		caps    []string
		refused map[string]string // path -> what the refusal must name; the rest restore exactly
	}{
		{"adopt-agent.service", agent, nil},
		{"adopt-watchdog.service", unitCaps(t, "adopt-watchdog.service"), nil},
		{"agent without CAP_FSETID", without(agent, "CAP_FSETID"), map[string]string{
			"/usr/local/bin/tool":  "dropped the setgid bit: group 5678 is not the agent's and the agent lacks CAP_FSETID",
			"/srv/app/shared.conf": "dropped the setgid bit",
		}},
		{"agent without CAP_SETFCAP", without(agent, "CAP_SETFCAP"), map[string]string{
			"/usr/local/bin/tool": "security.capability",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, state, s := setup(t)
			paths, want := found(t, root)
			mesh := takeAndConverge(t, s, root, paths)
			report := restoreUnder(t, c.caps, root, state, paths)
			for _, p := range paths {
				got := snap(t, filepath.Join(root, p))
				if why, ok := c.refused[p]; ok {
					if !strings.Contains(report[p], why) || !strings.Contains(report[p], "left as it was") {
						t.Errorf("%s: %q, want a refusal naming %q", p, report[p], why)
					}
					if !reflect.DeepEqual(got, mesh[p]) {
						t.Errorf("%s was changed by a refused restore: %+v, was %+v", p, got, mesh[p])
					}
					continue
				}
				if report[p] != "ok" {
					t.Errorf("%s: %s", p, report[p])
				}
				if !reflect.DeepEqual(got, want[p]) {
					t.Errorf("%s restored as %+v\nfound as %+v", p, got, want[p])
				}
			}
			leftovers, _ := filepath.Glob(filepath.Join(root, "*/*/.*adoption-*"))
			more, _ := filepath.Glob(filepath.Join(root, "*/*/*/.*adoption-*"))
			if len(leftovers)+len(more) != 0 {
				t.Errorf("temporary files left: %v %v", leftovers, more)
			}
		})
	}
}
