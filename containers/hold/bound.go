// This file holds what tells the hold that a UDP service is back: a
// datagram has no handshake, so that a socket in the node's namespace is
// bound to the port is all the node can tell of whether it answers.

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

// UDPBoundIn says whether the UDP tables (udp, udp6) under a process's
// net directory (/proc/PID/net) list a socket bound to port.
func UDPBoundIn(netDir string, port uint16) bool {
	for _, f := range []string{"udp", "udp6"} {
		fh, err := os.Open(filepath.Join(netDir, f))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && uint16(p) == port {
				fh.Close()
				return true
			}
		}
		fh.Close()
	}
	return false
}
