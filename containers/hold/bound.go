// This file holds what the hold reads of a UDP service's sockets: a
// datagram has no handshake, so that a socket in the node's namespace is
// bound to the port is all the node can tell of whether it answers, and
// its receive queue whether it has read what came before the hold.

package hold

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"adoption/netns"
)

// UDPBound says whether a UDP socket in the hold's namespace is bound to
// port: the rollback to a service on the node lets its held datagrams go
// only then, or they would meet a closed port.
func (h *Hold) UDPBound(port uint16) bool {
	bound := false
	_ = netns.Do(h.netns, func() error {
		// thread-self: the namespace of this (locked) thread.
		bound = UDPBoundIn("/proc/thread-self/net", port)
		return nil
	})
	return bound
}

// UDPQueued says whether a UDP socket in the hold's namespace bound to
// port has datagrams it has not read yet: a service stopped then drops
// them, and each is a client waiting out its timeout.
func (h *Hold) UDPQueued(port uint16) bool {
	queued := false
	_ = netns.Do(h.netns, func() error {
		queued = UDPQueuedIn("/proc/thread-self/net", port)
		return nil
	})
	return queued
}

// UDPBoundIn says whether the UDP tables (udp, udp6) under a process's
// net directory (/proc/PID/net) list a socket bound to port.
func UDPBoundIn(netDir string, port uint16) bool {
	return udpSockets(netDir, func(p uint16, _ uint64) bool { return p == port })
}

// UDPQueuedIn says whether a socket those tables list on port has bytes in
// its receive queue.
func UDPQueuedIn(netDir string, port uint16) bool {
	return udpSockets(netDir, func(p uint16, rx uint64) bool { return p == port && rx > 0 })
}

// udpSockets reports whether any socket of the UDP tables (udp, udp6)
// under netDir matches, given its local port and receive queue's length
// (the columns local_address and tx_queue:rx_queue, in hex).
func udpSockets(netDir string, match func(port uint16, rxQueue uint64) bool) bool {
	for _, f := range []string{"udp", "udp6"} {
		fh, err := os.Open(filepath.Join(netDir, f))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 5 {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			_, hexRx, ok2 := strings.Cut(fields[4], ":")
			if !ok || !ok2 {
				continue
			}
			p, err := strconv.ParseUint(hexPort, 16, 16)
			rx, err2 := strconv.ParseUint(hexRx, 16, 64)
			if err == nil && err2 == nil && match(uint16(p), rx) {
				fh.Close()
				return true
			}
		}
		fh.Close()
	}
	return false
}
