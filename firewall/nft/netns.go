// This file holds the dialing into a node's network namespace and the
// iptables-legacy tables loaded there (kinds.go refuses them).

package nft

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/nftables"

	"adoption/netns"
)

// Dial returns a connection to nftables in the network namespace at
// netnsPath (for example /run/netns/NAME or /proc/PID/ns/net); an empty path
// means the caller's own namespace. The closer releases the namespace file;
// the connection must not be used after it.
func Dial(netnsPath string) (*nftables.Conn, func() error, error) {
	return dial(netnsPath)
}

// dialLasting is Dial with one netlink socket for every request, instead
// of one dialled per request. The caller closes it with CloseLasting, then
// runs the closer, which lets go of the namespace.
func DialLasting(netnsPath string) (*nftables.Conn, func() error, error) {
	return dial(netnsPath, nftables.AsLasting())
}

func dial(netnsPath string, opts ...nftables.ConnOption) (*nftables.Conn, func() error, error) {
	if netnsPath == "" {
		c, err := nftables.New(opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("opening nftables in the own network namespace: %w", err)
		}
		return c, func() error { return nil }, nil
	}
	f, err := os.Open(netnsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("opening network namespace %s: %w", netnsPath, err)
	}
	// Netlink sockets are dialled with this fd (each request, or the lasting
	// one at its first use), so the file stays open until the closer runs.
	c, err := nftables.New(append(opts, nftables.WithNetNSFd(int(f.Fd())))...)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("opening nftables in network namespace %s: %w", netnsPath, err)
	}
	return c, f.Close, nil
}

// legacyTables reads the iptables-legacy tables loaded in the namespace: a
// firewall there is invisible to nftables and must not be taken for none.
func LegacyTables(netnsPath string) ([]string, error) {
	var names []string
	err := netns.Do(netnsPath, func() error {
		for _, f := range []string{"ip_tables_names", "ip6_tables_names"} {
			dir := "/proc/self/net"
			if netnsPath != "" {
				dir = "/proc/thread-self/net"
			}
			b, err := os.ReadFile(filepath.Join(dir, f))
			if os.IsNotExist(err) {
				continue // the legacy modules are not loaded: no legacy table anywhere
			}
			if err != nil {
				return err
			}
			names = append(names, strings.Fields(string(b))...)
		}
		return nil
	})
	return names, err
}
