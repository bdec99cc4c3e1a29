package units

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"adoption/sockets"
)

// TestProcessesStopAndStartAgain: an executable run by no unit is found by
// name, stopped with its command line kept (0600, under the given
// directory), and started again from it, the same arguments and working
// directory; an executable that does not run and was never stopped is not
// known. The executable's name is the test's own (the end-to-end tests run
// a predecessor-dns of theirs at the same time), and short enough to be
// its whole comm.
func TestProcessesStopAndStartAgain(t *testing.T) {
	dir := t.TempDir()
	name := fmt.Sprintf("pdns-%06x", rand.IntN(1<<24))
	unit := "exe:" + name
	exe := filepath.Join(dir, name)
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "600")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := Processes{Proc: sockets.Proc{Root: "/proc"}, Dir: filepath.Join(t.TempDir(), "state")}
	var m Manager = Router{Exes: p}
	st, err := m.Unit(ctx, unit)
	if err != nil || !st.Known || !st.Active || st.MainPID != cmd.Process.Pid {
		t.Fatalf("running: %+v %v", st, err)
	}
	if err := m.Stop(ctx, unit); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Unit(ctx, unit); !st.Known || st.Active {
		t.Fatalf("stopped: %+v", st)
	}
	if fi, err := os.Stat(p.record(name)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the kept command line: %v %v", fi, err)
	}
	if err := m.Start(ctx, unit); err != nil {
		t.Fatal(err)
	}
	st, _ = m.Unit(ctx, unit)
	if !st.Active || st.MainPID == cmd.Process.Pid {
		t.Fatalf("started again: %+v", st)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background(), unit) })
	args, _ := os.ReadFile(filepath.Join("/proc", itoa(st.MainPID), "cmdline"))
	cwd, _ := os.Readlink(filepath.Join("/proc", itoa(st.MainPID), "cwd"))
	if got := strings.Split(strings.TrimRight(string(args), "\x00"), "\x00"); len(got) != 2 || got[0] != exe || got[1] != "600" || cwd != dir {
		t.Fatalf("started again as %q in %s, want [%s 600] in %s", got, cwd, exe, dir)
	}
	if _, err := os.Stat(p.record(name)); !os.IsNotExist(err) {
		t.Fatalf("the kept command line stays after the start: %v", err)
	}
	if st, err := m.Unit(ctx, "exe:absent-exe"); err != nil || st.Known {
		t.Fatalf("an executable never seen: %+v %v", st, err)
	}
	if _, err := m.Unit(ctx, "exe:../x"); err == nil {
		t.Fatal("a path accepted as an executable's name")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
