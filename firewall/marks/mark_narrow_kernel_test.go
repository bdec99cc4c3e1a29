package marks

import (
	"testing"

	"adoption/internal/fwtest"
)

// A port the found firewall opens to one source only gets no mark: the
// mark would open it to every source. A closed port gets its mark as ever.
func TestKernelMarkKeepsSourceRestriction(t *testing.T) {
	fwtest.RequireTools(t, "ufw")
	n := fwtest.NewNamedNet(t, "mr-", "mr", "2e")
	n.Ufw(t, []string{"default", "deny", "incoming"},
		[]string{"allow", "from", fwtest.PeerV4b, "to", "any", "port", "2222", "proto", "tcp"},
		[]string{"--force", "enable"})
	n.Serve(t, []uint16{2222, 3333})
	m := NewMarker(n.Path(n.Node))
	added, _, err := m.Open("n1", "web", fwtest.Ports("2222/tcp", "3333/tcp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range added {
		if r.Mark.Port == 2222 {
			t.Errorf("a mark for 2222/tcp, which ufw opens to %s only: %v", fwtest.PeerV4b, r)
		}
	}
	if len(added) == 0 {
		t.Error("no mark for 3333/tcp, which ufw closes")
	}
	got := n.Reach(t, []fwtest.Probe{
		{Proto: "tcp", Src: fwtest.PeerV4a, Port: 2222}, {Proto: "tcp", Src: fwtest.PeerV4b, Port: 2222},
		{Proto: "tcp", Src: fwtest.PeerV4a, Port: 3333},
	})
	for p, ok := range got {
		want := p.Port == 3333 || p.Src == fwtest.PeerV4b
		if ok != want {
			t.Errorf("%v reached=%v, want %v", p, ok, want)
		}
	}
}
