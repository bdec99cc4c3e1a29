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
					fmt.Fprintf(c, "%s %s\n", name, p)
					c.Close()
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
