// This file holds the kernel as the oracle for traffic beyond TCP and UDP
// by port: ICMP and ICMPv6 messages, raw packets of other protocols
// (ESP, GRE, VRRP, SCTP) and broadcast or multicast UDP, sent from the peer
// namespace and counted where the node's sockets receive them (raw and UDP
// sockets see a packet only once the input hook has let it through). A
// packet is told by the tag its payload carries, not by its addresses,
// which NAT may have rewritten on the way (a container's egress, which
// Docker masquerades).

package fwtest

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ClassProbe is one packet of a traffic class from Src (a peer address)
// to Dst (empty: the node's own address of Src's family).
type ClassProbe struct {
	Name     string
	Src      string
	Proto    uint8
	Type     uint8  // ICMP or ICMPv6 type (code 0)
	Port     uint16 // UDP destination port
	Sport    uint16 // UDP source port; 0: any the kernel picks
	Dst      string
	HopLimit uint8 // 0: the kernel's default
}

func (p ClassProbe) v6() bool { return netip.MustParseAddr(p.Src).Is6() }

func (p ClassProbe) icmp() bool {
	return p.Proto == unix.IPPROTO_ICMP || p.Proto == unix.IPPROTO_ICMPV6
}

func (p ClassProbe) dst() netip.Addr {
	switch {
	case p.Dst != "":
		return netip.MustParseAddr(p.Dst)
	case p.v6():
		return netip.MustParseAddr(NodeV6)
	}
	return netip.MustParseAddr(NodeV4)
}

func (p ClassProbe) String() string {
	return fmt.Sprintf("%s (proto %d type %d port %d) %s->%s", p.Name, p.Proto, p.Type, p.Port, p.Src, p.dst())
}

// seen is what a node socket received: which probe (its index in the
// probes sent, from the tag in its payload), which protocol, and the ICMP
// type or UDP port.
type seen struct {
	v6    bool
	proto uint8
	what  uint16
	probe int
}

// key is what a socket receives of p, the i-th probe sent.
func (p ClassProbe) key(i int) seen {
	what := p.Port
	if p.icmp() {
		what = uint16(p.Type)
	}
	return seen{p.v6(), p.Proto, what, i}
}

// probeMark opens the tag in every probe's payload; then come the sending
// call's nonce, a colon and the probe's index (four hex digits).
const probeMark = "adoption class probe "

// tagOf is the tag of the i-th probe sent with nonce.
func tagOf(nonce string, i int) []byte { return fmt.Appendf(nil, "%s%s:%04x", probeMark, nonce, i) }

// probeIndex is the index in the tag of nonce that b (a received packet,
// headers and all) carries, if it carries one.
func probeIndex(b []byte, nonce string) (int, bool) {
	head := []byte(probeMark + nonce + ":")
	at := bytes.Index(b, head)
	if at < 0 || at+len(head)+4 > len(b) {
		return 0, false
	}
	var i [2]byte
	if _, err := hex.Decode(i[:], b[at+len(head):at+len(head)+4]); err != nil {
		return 0, false
	}
	return int(binary.BigEndian.Uint16(i[:])), true
}

// ClassReach sends every probe from the peer namespace (three times) and
// reports which the node received.
func (n *TestNet) ClassReach(t *testing.T, probes []ClassProbe) map[ClassProbe]bool {
	t.Helper()
	return n.ClassReachFrom(t, n.Peer, probes)
}

// ClassReachFrom is ClassReach with the probes sent from namespace peer
// (its one interface but lo: a container's namespace behind docker0).
func (n *TestNet) ClassReachFrom(t *testing.T, peer string, probes []ClassProbe) map[ClassProbe]bool {
	t.Helper()
	return ClassReachTo(t, peer, n.Node, probes)
}

// ClassReachTo sends every probe from namespace peer (three times) and
// reports which namespace to received: the node's, or a host's beyond it
// (a packet the node forwards, its source rewritten or not). Each
// namespace has one interface but lo, but the node.
func ClassReachTo(t *testing.T, peer, to string, probes []ClassProbe) map[ClassProbe]bool {
	t.Helper()
	n := make([]byte, 4)
	rand.Read(n)
	nonce := hex.EncodeToString(n)
	var fds []int
	var mu sync.Mutex
	got := map[seen]bool{}
	err := InNetns(to, func() error {
		idx, err := uplinkIndex()
		if err != nil {
			return err
		}
		opened := map[string]int{}
		for _, p := range probes {
			k := fmt.Sprintf("%v/%d", p.v6(), p.Proto)
			if p.Proto == unix.IPPROTO_UDP {
				k += fmt.Sprintf("/%d", p.Port)
			}
			fd, ok := opened[k]
			if !ok {
				if fd, err = listenClass(p); err != nil {
					return fmt.Errorf("%v: %w", p, err)
				}
				opened[k] = fd
				fds = append(fds, fd)
			}
			if d := p.dst(); d.IsMulticast() {
				if err := join(fd, d, idx); err != nil {
					return fmt.Errorf("%v: join %s: %w", p, d, err)
				}
			}
		}
		return nil
	})
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for _, fd := range fds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			receive(fd, nonce, done, func(s seen) {
				mu.Lock()
				got[s] = true
				mu.Unlock()
			})
		}()
	}
	err = InNetns(peer, func() error {
		idx, err := uplinkIndex()
		if err != nil {
			return err
		}
		for range 3 {
			for i, p := range probes {
				if err := send(p, idx, tagOf(nonce, i)); err != nil {
					return fmt.Errorf("%v: %w", p, err)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	out := map[ClassProbe]bool{}
	for i, p := range probes {
		out[p] = out[p] || got[p.key(i)]
	}
	return out
}

// uplinkIndex is the index of the namespace's one interface but lo.
func uplinkIndex() (int, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			return i.Index, nil
		}
	}
	return 0, fmt.Errorf("no interface but lo")
}

func family(v6 bool) int {
	if v6 {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func listenClass(p ClassProbe) (int, error) {
	if p.Proto != unix.IPPROTO_UDP {
		return unix.Socket(family(p.v6()), unix.SOCK_RAW, int(p.Proto))
	}
	fd, err := unix.Socket(family(p.v6()), unix.SOCK_DGRAM, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(p.Port)}
	if p.v6() {
		sa = &unix.SockaddrInet6{Port: int(p.Port)}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func join(fd int, group netip.Addr, idx int) error {
	if group.Is4() {
		err := unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, &unix.IPMreqn{Multiaddr: group.As4(), Ifindex: int32(idx)})
		if err == unix.EADDRINUSE {
			return nil // joined for another probe
		}
		return err
	}
	err := unix.SetsockoptIPv6Mreq(fd, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, &unix.IPv6Mreq{Multiaddr: group.As16(), Interface: uint32(idx)})
	if err == unix.EINVAL || err == unix.EADDRINUSE {
		return nil // ff02::1: every node is in it
	}
	return err
}

// receive records what fd receives until done of the probes sent with
// nonce: the probe its tag names and, for a raw socket, the protocol (and
// ICMP type) from the packet; for a UDP socket its bound port.
func receive(fd int, nonce string, done chan struct{}, rec func(seen)) {
	tv := unix.Timeval{Usec: 50000}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	typ, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	proto, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	port := uint16(0)
	if sa, err := unix.Getsockname(fd); err == nil {
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			port = uint16(a.Port)
		case *unix.SockaddrInet6:
			port = uint16(a.Port)
		}
	}
	buf := make([]byte, 2048)
	for {
		select {
		case <-done:
			return
		default:
		}
		k, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || from == nil {
			continue
		}
		i, ok := probeIndex(buf[:k], nonce)
		if !ok {
			continue // not a probe of this call's
		}
		s := seen{probe: i}
		_, s.v6 = from.(*unix.SockaddrInet6)
		s.proto = uint8(proto)
		if typ == unix.SOCK_DGRAM {
			s.proto, s.what = unix.IPPROTO_UDP, port
		} else if s.proto == unix.IPPROTO_ICMP || s.proto == unix.IPPROTO_ICMPV6 {
			off := 0
			if !s.v6 && k > 0 {
				off = int(buf[0]&0x0f) * 4 // an IPv4 raw socket reads the IP header
			}
			if off >= k {
				continue
			}
			s.what = uint16(buf[off])
		}
		rec(s)
	}
}

// send sends one packet of probe p from its source, out of interface idx,
// its payload carrying tag.
func send(p ClassProbe, idx int, tag []byte) error {
	v6 := p.v6()
	var fd int
	var err error
	if p.Proto == unix.IPPROTO_UDP {
		fd, err = unix.Socket(family(v6), unix.SOCK_DGRAM, 0)
	} else {
		fd, err = unix.Socket(family(v6), unix.SOCK_RAW, int(p.Proto))
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	src, dst := netip.MustParseAddr(p.Src), p.dst()
	var from, to unix.Sockaddr
	sport := 0
	if p.Proto == unix.IPPROTO_UDP {
		sport = int(p.Sport)
	}
	if v6 {
		// A link-local address is the uplink's (its scope).
		zone := func(a netip.Addr) uint32 {
			if a.IsLinkLocalUnicast() {
				return uint32(idx)
			}
			return 0
		}
		from = &unix.SockaddrInet6{Addr: src.As16(), Port: sport, ZoneId: zone(src)}
		to = &unix.SockaddrInet6{Addr: dst.As16(), Port: int(p.Port), ZoneId: zone(dst)}
	} else {
		from, to = &unix.SockaddrInet4{Addr: src.As4(), Port: sport}, &unix.SockaddrInet4{Addr: dst.As4(), Port: int(p.Port)}
	}
	if err := unix.Bind(fd, from); err != nil {
		return err
	}
	if err := hops(fd, v6, dst, p.HopLimit, idx); err != nil {
		return err
	}
	payload := tag
	switch {
	case p.icmp():
		// A fresh identifier each time: conntrack ties an echo request
		// to one already answered with the same identifier, and would
		// find a later probe established (passed by any ruleset that
		// accepts established traffic), not new.
		id := make([]byte, 2)
		rand.Read(id)
		msg := append([]byte{p.Type, 0, 0, 0, id[0], id[1], 0, 1}, payload...)
		if p.Type >= 133 && p.Type <= 136 {
			// neighbour discovery: reserved word, then the target
			node := netip.MustParseAddr(NodeV6).As16()
			msg = append(append([]byte{p.Type, 0, 0, 0, 0, 0, 0, 0}, node[:]...), payload...)
		}
		if !v6 {
			binary.BigEndian.PutUint16(msg[2:], checksum(msg)) // the kernel sums ICMPv6 only
		}
		payload = msg
	case p.Proto == unix.IPPROTO_GRE:
		payload = append([]byte{0, 0, 0x08, 0x00}, payload...)
	}
	return unix.Sendto(fd, payload, 0, to)
}

// hops sets the hop limit (unicast or multicast) and the multicast or
// broadcast output interface.
func hops(fd int, v6 bool, dst netip.Addr, hl uint8, idx int) error {
	var errs []error
	if v6 {
		if dst.IsMulticast() {
			errs = append(errs, unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, idx))
			if hl != 0 {
				errs = append(errs, unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, int(hl)))
			}
		} else if hl != 0 {
			errs = append(errs, unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, int(hl)))
		}
	} else {
		switch {
		case dst.IsMulticast():
			errs = append(errs, unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: int32(idx)}))
			if hl != 0 {
				errs = append(errs, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, int(hl)))
			}
		case dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			errs = append(errs, unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BROADCAST, 1))
			name, err := net.InterfaceByIndex(idx)
			if err != nil {
				return err
			}
			errs = append(errs, unix.BindToDevice(fd, name.Name))
		case hl != 0:
			errs = append(errs, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_TTL, int(hl)))
		}
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
