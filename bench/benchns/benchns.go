// Package benchns is the bench's network namespaces: every one is named
// bn-<what>-<random>, every address is in 198.18.0.0/15 and sits only on
// the bench's own veth pairs; each section deletes its own when it ends,
// on error too. Shared by package main and the section packages.
package benchns

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"adoption/netns"
)

// NS is one of the bench's namespaces.
type NS struct {
	Name, Path string
}

// RandHex is n random bytes in hex: the random part of the bench's names.
func RandHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// New creates bn-<what>-<random> with its loopback up.
func New(what string) (*NS, error) {
	n := &NS{Name: "bn-" + what + "-" + RandHex(3)}
	n.Path = filepath.Join("/run/netns", n.Name)
	for _, s := range [][]string{{"ip", "netns", "add", n.Name}, {"ip", "-n", n.Name, "link", "set", "lo", "up"}} {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			n.Del()
			return nil, fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, bytes.TrimSpace(out))
		}
	}
	return n, nil
}

// Del deletes the namespace and its /etc/netns directory, best effort.
func (n *NS) Del() {
	if n == nil {
		return
	}
	exec.Command("ip", "netns", "del", n.Name).Run() //nolint:errcheck // best effort at cleanup
	os.RemoveAll(filepath.Join("/etc/netns", n.Name))
}

// Link joins a and b by a veth pair: a gets 198.18.<sub>.1/30, b .2/30.
func Link(a, b *NS) (aAddr, bAddr string, err error) {
	id := RandHex(3)
	sub := 1 + int(id[0])%250 // any /24 of 198.18.0.0/15's first half
	aAddr, bAddr = fmt.Sprintf("198.18.%d.1", sub), fmt.Sprintf("198.18.%d.2", sub)
	va, vb := "bnv"+id+"a", "bnv"+id+"b"
	for _, s := range [][]string{
		{"ip", "link", "add", va, "netns", a.Name, "type", "veth", "peer", "name", vb, "netns", b.Name},
		{"ip", "-n", a.Name, "addr", "add", aAddr + "/30", "dev", va},
		{"ip", "-n", b.Name, "addr", "add", bAddr + "/30", "dev", vb},
		{"ip", "-n", a.Name, "link", "set", va, "up"},
		{"ip", "-n", b.Name, "link", "set", vb, "up"},
	} {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, bytes.TrimSpace(out))
		}
	}
	return aAddr, bAddr, nil
}

// Run runs one command from a thread inside the namespace (a child
// inherits the forking thread's network namespace): what it costs is the
// command's own cost, as on the node itself, without ip netns exec.
func (n *NS) Run(stdin []byte, args ...string) (string, error) {
	var out, errb bytes.Buffer
	err := netns.Do(n.Path, func() error {
		cmd := exec.Command(args[0], args[1:]...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		cmd.Stdout, cmd.Stderr = &out, &errb
		return cmd.Run()
	})
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.String(), nil
}

// Serve listens on proto/port inside the namespace, held by this process
// (so the probe finds the bench as the holder): TCP connections get a
// greeting line and then an echo, as sandbox.Serve does; UDP is bound only.
func (n *NS) Serve(proto string, port int) (io.Closer, error) {
	var c io.Closer
	err := netns.Do(n.Path, func() error {
		addr := fmt.Sprintf(":%d", port)
		if proto == "udp" {
			pc, err := net.ListenPacket("udp", addr)
			c = pc
			return err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		c = ln
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer conn.Close()
					fmt.Fprintf(conn, "bench %d/tcp\n", port)
					_, _ = io.Copy(conn, conn)
				}()
			}
		}()
		return nil
	})
	return c, err
}
