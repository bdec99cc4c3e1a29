// This file holds the ipsets an iptables "-m set --match-set" looks up: the
// set's name by the index the match holds (the getsockopt iptables uses),
// and its members (the ipset netlink LIST dump), so a match on a hash:ip
// or hash:net set decodes to the prefixes it holds.

package nft

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"adoption/netns"
)

// IPSet is one ipset as a match on it decodes: its name, and its members
// as prefixes, or why they cannot be (Unknown).
type IPSet struct {
	Name     string
	Type     string
	Family   string // "ip" or "ip6"
	Prefixes []netip.Prefix
	Unknown  string
}

// ipset netlink and sockopt constants (linux/netfilter/ipset/ip_set.h).
const (
	nfnlSubsysIPSet    = 6
	ipsetCmdList       = 7
	ipsetProtocol      = 7
	ipsetProtocolMin   = 6
	ipsetAttrProtocol  = 1
	ipsetAttrSetname   = 2
	ipsetAttrTypename  = 3
	ipsetAttrFamily    = 5
	ipsetAttrData      = 7
	ipsetAttrADT       = 8
	ipsetAttrIP        = 1
	ipsetAttrCIDR      = 3
	ipsetAttrCadtFlags = 8
	ipsetAttrIPv4      = 1
	ipsetAttrIPv6      = 2
	ipsetFlagNomatch   = 1 << 2
	soIPSet            = 83
	ipSetOpGetByIndex  = 0x00000007
	ipsetMaxNameLen    = 32
)

// IPSets reads the ipsets of the network namespace whose fd is nsFD (0: the
// caller's own), by index. A namespace without ipsets (or without the
// ipset module) has none.
func IPSets(nsFD int) (map[uint16]*IPSet, error) {
	nc, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: nsFD})
	if err != nil {
		return nil, fmt.Errorf("opening netlink: %w", err)
	}
	defer nc.Close()
	return ipsetsOn(nc, nsFDPath(nsFD))
}

// ipsetsOn is IPSets over nc, a netfilter socket in the namespace at path
// ("": the caller's own).
func ipsetsOn(nc *netlink.Conn, path string) (map[uint16]*IPSet, error) {
	byName := map[string]*IPSet{}
	var order []string
	for _, proto := range []uint8{ipsetProtocol, ipsetProtocolMin} {
		ae := netlink.NewAttributeEncoder()
		ae.Uint8(ipsetAttrProtocol, proto)
		attrs, _ := ae.Encode()
		msgs, err := nc.Execute(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysIPSet<<8 | ipsetCmdList), Flags: netlink.Request | netlink.Dump},
			Data:   append([]byte{unix.AF_INET, unix.NFNETLINK_V0, 0, 0}, attrs...),
		})
		if err != nil {
			if proto == ipsetProtocol {
				continue // an older kernel speaks protocol 6
			}
			return map[uint16]*IPSet{}, nil // no ipset in this kernel
		}
		for _, m := range msgs {
			if len(m.Data) < 4 {
				continue
			}
			s, err := decodeIPSetMsg(m.Data[4:])
			if err != nil || s.Name == "" {
				continue
			}
			if have, ok := byName[s.Name]; ok {
				// A big set comes in several messages.
				have.Prefixes = append(have.Prefixes, s.Prefixes...)
				if have.Unknown == "" {
					have.Unknown = s.Unknown
				}
				continue
			}
			byName[s.Name] = s
			order = append(order, s.Name)
		}
		break
	}
	out := map[uint16]*IPSet{}
	if len(order) == 0 {
		return out, nil
	}
	err := netns.Do(path, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// Indexes are dense up to the highest in use; stop once every set
		// is named (or at the kernel's default maximum).
		for i, named := 0, 0; named < len(order) && i < 65535; i++ {
			name, ok := ipsetName(fd, uint16(i))
			if !ok {
				if i > 4096 {
					break
				}
				continue
			}
			if s, ok := byName[name]; ok {
				out[uint16(i)] = s
				named++
			}
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("naming ipsets by index: %w", err)
	}
	return out, nil
}

// ipsetName asks the kernel the name of the set at index i (struct
// ip_set_req_get_set: op, version, union { name[32]; index }).
func ipsetName(fd int, i uint16) (string, bool) {
	for _, v := range []uint32{ipsetProtocol, ipsetProtocolMin} {
		var req [8 + ipsetMaxNameLen]byte
		binary.NativeEndian.PutUint32(req[0:], ipSetOpGetByIndex)
		binary.NativeEndian.PutUint32(req[4:], v)
		binary.NativeEndian.PutUint16(req[8:], i)
		n := uint32(len(req))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_IP, soIPSet, uintptr(unsafe.Pointer(&req[0])), uintptr(unsafe.Pointer(&n)), 0)
		if errno != 0 {
			continue
		}
		name := req[8:]
		for k, b := range name {
			if b == 0 {
				name = name[:k]
				break
			}
		}
		return string(name), len(name) > 0
	}
	return "", false
}

func decodeIPSetMsg(b []byte) (*IPSet, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	s := &IPSet{}
	for ad.Next() {
		switch ad.Type() {
		case ipsetAttrSetname:
			s.Name = ad.String()
		case ipsetAttrTypename:
			s.Type = ad.String()
		case ipsetAttrFamily:
			switch ad.Uint8() {
			case unix.NFPROTO_IPV4:
				s.Family = "ip"
			case unix.NFPROTO_IPV6:
				s.Family = "ip6"
			}
		case ipsetAttrADT:
			ad.Nested(func(items *netlink.AttributeDecoder) error {
				for items.Next() {
					if items.Type() != ipsetAttrData {
						continue
					}
					items.Nested(func(it *netlink.AttributeDecoder) error {
						var addr netip.Addr
						cidr := -1
						for it.Next() {
							switch it.Type() {
							case ipsetAttrIP:
								it.Nested(func(ip *netlink.AttributeDecoder) error {
									for ip.Next() {
										switch ip.Type() {
										case ipsetAttrIPv4, ipsetAttrIPv6:
											addr, _ = netip.AddrFromSlice(ip.Bytes())
										}
									}
									return nil
								})
							case ipsetAttrCIDR:
								cidr = int(it.Uint8())
							case ipsetAttrCadtFlags:
								// Sent in network byte order (NLA_F_NET_BYTEORDER).
								if b := it.Bytes(); len(b) == 4 && binary.BigEndian.Uint32(b)&ipsetFlagNomatch != 0 {
									s.Unknown = "it holds nomatch entries"
								}
							}
						}
						if !addr.IsValid() {
							s.Unknown = "an entry without an address"
							return nil
						}
						if cidr < 0 {
							cidr = addr.BitLen()
						}
						p, err := addr.Prefix(cidr)
						if err != nil {
							s.Unknown = "an entry with a bad prefix length"
							return nil
						}
						s.Prefixes = append(s.Prefixes, p)
						return nil
					})
				}
				return nil
			})
		}
	}
	return s, ad.Err()
}
