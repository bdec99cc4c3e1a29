package hold

import (
	"net"
	"testing"
)

// A UDP socket bound in the hold's namespace is seen, on its port only,
// and no longer once it is closed.
func TestUDPBound(t *testing.T) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(c.LocalAddr().(*net.UDPAddr).Port)
	h := NewHold("", "n1")
	if !h.UDPBound(port) || !UDPBoundIn("/proc/self/net", port) {
		t.Fatalf("udp %d bound here, not seen", port)
	}
	c.Close()
	if h.UDPBound(port) {
		t.Fatalf("udp %d closed, still seen bound", port)
	}
	if UDPBoundIn(t.TempDir(), port) {
		t.Fatal("a directory with no UDP tables lists a socket")
	}
}
