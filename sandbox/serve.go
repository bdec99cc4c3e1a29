package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"adoption/config"
)

// Serve listens on every port: TCP connections get a greeting line naming
// the node and port, UDP datagrams are echoed. It blocks forever.
func Serve(name string, ports []config.Port, out io.Writer) error {
	for _, p := range ports {
		addr := fmt.Sprintf(":%d", p.Num)
		switch p.Proto {
		case "tcp":
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen %s: %w", p, err)
			}
			go func(ln net.Listener, p config.Port) {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					// A greeting, then an echo until the client closes: a
					// connection held across a flip can prove it still
					// carries data.
					go func(c net.Conn) {
						defer c.Close()
						fmt.Fprintf(c, "%s %s\n", name, p)
						_, _ = io.Copy(c, c)
					}(c)
				}
			}(ln, p)
		case "udp":
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return fmt.Errorf("listen %s: %w", p, err)
			}
			go func(pc net.PacketConn) {
				buf := make([]byte, 1500)
				for {
					n, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					pc.WriteTo(buf[:n], from) //nolint:errcheck // best effort echo
				}
			}(pc)
		}
	}
	fmt.Fprintf(out, "serving %d port(s) for %s (pid %d)\n", len(ports), name, os.Getpid())
	select {}
}

// Connect tries one TCP connection and says what the path did: "open" (a
// listener answered), "refused" (the firewall let it through to a closed
// port: an RST came back) or "filtered" (dropped: nothing came back).
func Connect(addr string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err == nil {
		c.Close()
		return "open"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "refused"
	}
	return "filtered"
}

// HammerResult counts what a hammer saw.
type HammerResult struct {
	OK, Refused, TimedOut int
	// Held says whether a connection opened before the run still echoed
	// data after it.
	Held bool
	// Slowest is the longest an answered connection took from its dial to
	// its answer (a held SYN shows here); Gap is the longest time between
	// two answers in a row, what a client sees of an outage.
	Slowest time.Duration `json:"slowest_ns"`
	Gap     time.Duration `json:"gap_ns"`
	// Bodies counts the answers by body, when the hammer asks a path
	// other than /health (HammerHTTPPath).
	Bodies map[string]int `json:"bodies,omitempty"`
}

// answered records one connection answered after it was dialled at start.
func (r *HammerResult) answered(start time.Time, last *time.Time) {
	now := time.Now()
	r.OK++
	if d := now.Sub(start); d > r.Slowest {
		r.Slowest = d
	}
	if !last.IsZero() && now.Sub(*last) > r.Gap {
		r.Gap = now.Sub(*last)
	}
	*last = now
}

// Hammer connects to addr every `every` for `d`, each connection reading
// the greeting and closing, while one connection opened first is held and
// asked to echo at the end.
func Hammer(addr string, every, d time.Duration) (HammerResult, error) {
	var r HammerResult
	held, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return r, fmt.Errorf("open the held connection: %w", err)
	}
	defer held.Close()
	greet := make([]byte, 128)
	_ = held.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := held.Read(greet); err != nil {
		return r, fmt.Errorf("read the held connection's greeting: %w", err)
	}
	end := time.Now().Add(d)
	var last time.Time
	for time.Now().Before(end) {
		start := time.Now()
		// A client waits up to 3 s for a connection, as the cutover's and
		// the flip's contract says: one SYN retransmitted (after 1 s) is a
		// slow connection, not a failed one; a refusal or a 3 s silence is.
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		switch {
		case err == nil:
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if _, rerr := c.Read(greet); rerr != nil {
				r.TimedOut++
			} else {
				r.answered(start, &last)
			}
			c.Close()
		case errors.Is(err, syscall.ECONNREFUSED):
			r.Refused++
		default:
			r.TimedOut++
		}
		time.Sleep(every)
	}
	_ = held.SetDeadline(time.Now().Add(time.Second))
	if _, err := held.Write([]byte("still-here\n")); err == nil {
		buf := make([]byte, 11)
		if _, err := io.ReadFull(held, buf); err == nil && string(buf) == "still-here\n" {
			r.Held = true
		}
	}
	return r, nil
}
