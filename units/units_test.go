package units

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"dnsmasq.service", "getty@tty1.service", "systemd-resolved.service"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "dnsmasq", "../x.service", "a/b.service", "-x.service", "x.socket", "dnsmasq.service\n", "a b.service"} {
		if err := CheckName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestStandInSupervisor: the stand-in's client and server agree on the
// Manager interface: stop waits for the process to be gone, start runs it
// again, enablement is kept, an unknown unit is not known.
func TestStandInSupervisor(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "units.sock")
	sup, err := NewSupervisor(sock, map[string]Service{"sleeper.service": {Cmd: []string{"/bin/sleep", "600"}, Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var m Manager = StandIn{Socket: sock}
	if err := m.Start(ctx, "sleeper.service"); err != nil {
		t.Fatal(err)
	}
	st, err := m.Unit(ctx, "sleeper.service")
	if err != nil || !st.Known || !st.Active || !st.Enabled || st.MainPID == 0 {
		t.Fatalf("after start: %+v %v", st, err)
	}
	if err := m.Stop(ctx, "sleeper.service"); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Unit(ctx, "sleeper.service"); st.Active || st.MainPID != 0 {
		t.Fatalf("after stop: %+v", st)
	}
	if err := m.Disable(ctx, "sleeper.service"); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Unit(ctx, "sleeper.service"); st.Enabled {
		t.Fatalf("after disable: %+v", st)
	}
	if st, err := m.Unit(ctx, "other.service"); err != nil || st.Known {
		t.Fatalf("unknown unit: %+v %v", st, err)
	}
	if _, err := m.Unit(ctx, "../etc.service"); err == nil {
		t.Fatal("a bad name reached the supervisor")
	}
}
