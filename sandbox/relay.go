package sandbox

// This file holds the management link's relay: the host's Temporal dev
// server listens on loopback only, so on the link's host end a TCP relay
// stands in for the frontend address a real node would dial. It runs in
// the host's namespace and touches no firewall.

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// Relay accepts on listen and pipes each connection to to. It blocks.
func Relay(listen, to string, out io.Writer) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("relay listen %s: %w", listen, err)
	}
	fmt.Fprintf(out, "relaying %s to %s (pid %d)\n", listen, to, os.Getpid())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func(c net.Conn) {
			defer c.Close()
			up, err := net.DialTimeout("tcp", to, 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
			<-done
			<-done
		}(c)
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
