package hold

import (
	"net"
	"testing"
	"time"

	"adoption/internal/wait"
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

// A datagram sent to a socket that has not read it is seen queued on that
// port only, and no longer once it is read.
func TestUDPQueued(t *testing.T) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port := uint16(c.LocalAddr().(*net.UDPAddr).Port)
	h := NewHold("", "n1")
	if h.UDPQueued(port) {
		t.Fatalf("udp %d: nothing sent, seen queued", port)
	}
	s, err := net.Dial("udp", c.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Write([]byte("query")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, time.Second, "the datagram sent and not read seen queued", func() bool { return h.UDPQueued(port) })
	buf := make([]byte, 64)
	if _, _, err := c.ReadFrom(buf); err != nil {
		t.Fatal(err)
	}
	if h.UDPQueued(port) {
		t.Fatalf("udp %d: read, still seen queued", port)
	}
}
