// This file holds the dialing into a node's network namespace and the
// kind of the found firewall (iptables-nft, nftables, none, refused).

package nft

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/nftables"

	"adoption/firewall"
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

// Kinds of found firewall.
const (
	KindIptablesNft = "iptables-nft"
	KindNftables    = "nftables"
	KindNone        = "none"
)

// Kind says which kind of firewall the ruleset is: iptables-nft (tables that
// iptables-nft made, as ufw writes them), nftables (a native table filters at
// input or forward) or none. legacyTables are the names the caller read from
// /proc/net/ip_tables_names (and ip6_tables_names) inside the namespace: any
// means iptables-legacy holds rules nftables cannot see, and Kind refuses.
// A firewalld table is refused too. Kind only reads; the errors say so.
func Kind(rs *firewall.Ruleset, legacyTables []string) (string, error) {
	if len(legacyTables) > 0 {
		names := append([]string(nil), legacyTables...)
		sort.Strings(names)
		return "", fmt.Errorf("found iptables-legacy tables (%s) in /proc/net/ip_tables_names: rules loaded through the legacy "+
			"x_tables interface are invisible to nftables, so this firewall is not supported; nothing was changed "+
			"(convert it with iptables-legacy-save | iptables-nft-restore, or flush the legacy tables)", strings.Join(names, ", "))
	}
	for _, t := range rs.Tables {
		if t.Name == "firewalld" || strings.HasPrefix(t.Name, "firewalld_") {
			return "", fmt.Errorf("found table %s %s owned by firewalld: a firewall managed by firewalld is not supported "+
				"(firewalld rewrites its table on every reload); nothing was changed", t.Family, t.Name)
		}
	}
	ipt, ufw, native := false, false, false
	for i := range rs.Tables {
		t := &rs.Tables[i]
		if !firewall.IsIPFamily(t.Family) {
			continue
		}
		filters := false
		for _, c := range t.Chains {
			if firewall.IsUfwChain(c.Name) {
				ufw = true
			}
			if (c.Hook == firewall.HookInput || c.Hook == firewall.HookForward) && (c.Type == "" || c.Type == "filter") {
				filters = true
			}
		}
		if !filters {
			continue
		}
		if firewall.IsIptablesTable(t) {
			ipt = true
		} else {
			native = true
		}
	}
	switch {
	case ufw, ipt && !native:
		return KindIptablesNft, nil
	case native:
		return KindNftables, nil
	}
	return KindNone, nil
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
