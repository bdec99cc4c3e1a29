package cutover

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// A listener that accepts and closes at once is what Docker's userland proxy
// looks like with nothing behind it: TCPProbe must not call that healthy.
func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var closeAtOnce atomic.Bool
	closeAtOnce.Store(true)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if closeAtOnce.Load() {
				c.Close()
			} else {
				defer c.Close()
			}
		}
	}()
	if err := TCPProbe(l.Addr().String())(context.Background()); err == nil {
		t.Fatal("a connection closed at once passed the probe")
	}
	closeAtOnce.Store(false)
	if err := TCPProbe(l.Addr().String())(context.Background()); err != nil {
		t.Fatalf("a held connection failed the probe: %v", err)
	}
}

func TestMeasureUnavailability(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	serve := func(l net.Listener) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { time.Sleep(50 * time.Millisecond); c.Close() }()
		}
	}
	go serve(l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gap, fails, err := MeasureUnavailability(ctx, addr, 10*time.Millisecond, func() error {
		l.Close()
		time.Sleep(300 * time.Millisecond)
		l2, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		go serve(l2)
		t.Cleanup(func() { l2.Close() })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gap %s, %d failed probes", gap, fails)
	if gap < 250*time.Millisecond || gap > 600*time.Millisecond || fails < 10 {
		t.Fatalf("gap %s with %d failures for a 300ms outage", gap, fails)
	}
}
