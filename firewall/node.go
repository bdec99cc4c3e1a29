// This file holds what the evaluator knows of the node besides its ruleset:
// its interfaces (so iifname/oifname are decided, and a DNAT target is
// mapped to the bridge it leaves by) and whether it forwards at all.

package firewall

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"adoption/netns"
)

// Node is what the evaluator knows of the node besides its ruleset. The
// zero Node knows nothing: interface names other than lo stay undecided,
// forwarding is taken as on (the assumption under which no opening is
// missed), and forwarded traffic is also evaluated as routed traffic to an
// unknown destination, as before DNAT was modelled.
type Node struct {
	// Interfaces of the node's network namespace; nil: not known.
	Interfaces []Interface `json:"interfaces,omitempty"`
	// Forwarding per family ("ip", "ip6"), from /proc/sys/net/ipv4/ip_forward
	// and /proc/sys/net/ipv6/conf/all/forwarding. A family missing is not
	// known and taken as on.
	Forwarding map[string]bool `json:"forwarding,omitempty"`
	// EngineBridges are the bridges the node's container engine names (a
	// Docker network's bridge name, com.docker.network.bridge.name
	// included), with the engine ("docker"). Nil: not asked.
	EngineBridges map[string]string `json:"engine_bridges,omitempty"`
}

// Interface is one network interface of the node.
type Interface struct {
	Name string `json:"name"`
	// Kind is the link kind ("bridge", "veth", "wireguard", ...), "" for a
	// plain device.
	Kind string `json:"kind,omitempty"`
	// Master is set for an interface enslaved to a bridge or bond: packets
	// it carries reach IP under the master's name.
	Master   string         `json:"master,omitempty"`
	Loopback bool           `json:"loopback,omitempty"`
	Addrs    []netip.Prefix `json:"addrs,omitempty"`
}

// HasInterfaces reports whether n is set and its interfaces were read.
func (n *Node) HasInterfaces() bool { return n != nil && n.Interfaces != nil }

// forwards reports whether the node forwards family fam (unknown: yes).
func (n *Node) Forwards(fam string) bool {
	if n == nil {
		return true
	}
	on, ok := n.Forwarding[fam]
	return !ok || on
}

// uplinks are the interfaces a client from outside may arrive on: every
// interface that is not loopback, not enslaved and not a container bridge.
func (n *Node) Uplinks() []string {
	var out []string
	for _, i := range n.Interfaces {
		if i.Loopback || i.Master != "" || n.BridgeTool(i.Name) != "" {
			continue
		}
		out = append(out, i.Name)
	}
	return out
}

// local reports whether a is one of the node's own addresses.
func (n *Node) Local(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	for _, i := range n.Interfaces {
		for _, p := range i.Addrs {
			if p.Addr() == a {
				return true
			}
		}
	}
	return false
}

// Own are the node's own addresses of family fam ("ip", "ip6") that a
// client from outside may send a packet to: every address of its
// interfaces, bridges included (the kernel delivers to any local address
// whichever interface the packet came in by), but loopback, link-local and
// multicast ones. Nil when the interfaces are not known. The one
// definition the evaluator decides destination conditions against.
func (n *Node) Own(fam string) []netip.Addr {
	if !n.HasInterfaces() {
		return nil
	}
	var out []netip.Addr
	for _, i := range n.Interfaces {
		for _, p := range i.Addrs {
			a := p.Addr().Unmap()
			if a.Is4() != (fam == FamilyIP) || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() {
				continue
			}
			out = append(out, a)
		}
	}
	return out
}

// oifFor names the interface a packet to a leaves by: the one with the most
// specific connected network holding a.
func (n *Node) OifFor(a netip.Addr) (string, bool) {
	best, bits := "", -1
	for _, i := range n.Interfaces {
		if i.Loopback {
			continue
		}
		for _, p := range i.Addrs {
			if p.Masked().Contains(a) && p.Bits() > bits {
				best, bits = i.Name, p.Bits()
			}
		}
	}
	return best, bits >= 0
}

// Known reports whether the node's interfaces are known (ReadNode read
// them): only then can an address be mapped to one of them.
func (n Node) Known() bool { return n.HasInterfaces() }

// InterfaceFor names the interface of the node whose connected network
// holds a (the most specific one): where the node sends a packet DNATed to
// a, as the evaluator maps it. False: a is on none of the node's networks.
func (n Node) InterfaceFor(a netip.Addr) (string, bool) { return n.OifFor(a.Unmap()) }

// ReadNode reads the interfaces and forwarding switches of the network
// namespace at netnsPath ("" for the caller's own). It only reads.
func ReadNode(netnsPath string) (Node, error) {
	var n Node
	err := netns.Do(netnsPath, func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return fmt.Errorf("listing interfaces: %w", err)
		}
		links, err := linkInfo()
		if err != nil {
			return err
		}
		n.Interfaces = []Interface{}
		for _, ifc := range ifs {
			i := Interface{Name: ifc.Name, Loopback: ifc.Flags&net.FlagLoopback != 0}
			if l, ok := links[ifc.Index]; ok {
				i.Kind = l.kind
				for _, m := range ifs {
					if m.Index == l.master && l.master != 0 {
						i.Master = m.Name
					}
				}
			}
			addrs, err := ifc.Addrs()
			if err != nil {
				return fmt.Errorf("addresses of %s: %w", ifc.Name, err)
			}
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					ip, ok := netip.AddrFromSlice(ipn.IP)
					ones, _ := ipn.Mask.Size()
					if ok {
						ip = ip.Unmap()
						if ip.Is4() && ones > 32 {
							ones -= 96
						}
						i.Addrs = append(i.Addrs, netip.PrefixFrom(ip, ones))
					}
				}
			}
			n.Interfaces = append(n.Interfaces, i)
		}
		n.Forwarding = map[string]bool{}
		for fam, f := range map[string]string{FamilyIP: "/proc/sys/net/ipv4/ip_forward", FamilyIP6: "/proc/sys/net/ipv6/conf/all/forwarding"} {
			b, err := os.ReadFile(f)
			if os.IsNotExist(err) {
				continue // no IPv6 in this kernel: not known
			}
			if err != nil {
				return fmt.Errorf("reading %s: %w", f, err)
			}
			n.Forwarding[fam] = strings.TrimSpace(string(b)) != "0"
		}
		return nil
	})
	return n, err
}

type link struct {
	kind   string
	master int
}

// linkInfo asks rtnetlink for every link's kind and master, which
// net.Interfaces does not say.
func linkInfo() (map[int]link, error) {
	tab, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	out := map[int]link{}
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		idx := int(int32(binary.NativeEndian.Uint32(m.Data[4:8])))
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			continue
		}
		var l link
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.IFLA_MASTER:
				if len(a.Value) >= 4 {
					l.master = int(binary.NativeEndian.Uint32(a.Value))
				}
			case unix.IFLA_LINKINFO:
				l.kind = infoKind(a.Value)
			}
		}
		out[idx] = l
	}
	return out, nil
}

// infoKind reads IFLA_INFO_KIND from a nested IFLA_LINKINFO.
func infoKind(b []byte) string {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) &^ unix.NLA_F_NESTED
		if l < 4 || l > len(b) {
			return ""
		}
		if typ == unix.IFLA_INFO_KIND {
			return strings.TrimRight(string(b[4:l]), "\x00")
		}
		next := (l + 3) &^ 3
		if next > len(b) {
			return ""
		}
		b = b[next:]
	}
	return ""
}
