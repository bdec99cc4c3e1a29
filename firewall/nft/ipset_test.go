package nft

import (
	"encoding/binary"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// "-m set --match-set NAME src|dst" decodes to the set's members where
// they were read, and is undecidable, naming the set, where not.
func TestDecodeIPSetMatch(t *testing.T) {
	bl := &IPSet{Name: "bl", Type: "hash:net", Family: firewall.FamilyIP, Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	ports := &IPSet{Name: "bp", Type: "hash:ip,port", Family: firewall.FamilyIP}
	d := Decoder{Family: firewall.FamilyIP, IPSets: map[uint16]*IPSet{0: bl, 3: ports}}
	rule := func(index uint16, flags byte) firewall.Rule {
		info := xt.Unknown([]byte{byte(index), byte(index >> 8), 1, flags})
		return d.Rule(&nftables.Rule{Exprs: []expr.Any{&expr.Match{Name: "set", Rev: 1, Info: &info}, &expr.Verdict{Kind: expr.VerdictDrop}}})
	}
	for _, c := range []struct {
		name   string
		index  uint16
		flags  byte
		want   firewall.Cond
		reason string
	}{
		{"src", 0, 0x02, firewall.Cond{Kind: firewall.CondSaddr, Prefixes: bl.Prefixes}, ""},
		{"dst", 0, 0x00, firewall.Cond{Kind: firewall.CondDaddr, Prefixes: bl.Prefixes}, ""},
		{"! src", 0, 0x03, firewall.Cond{Kind: firewall.CondSaddr, Prefixes: bl.Prefixes, Negate: true}, ""},
		{"another type", 3, 0x02, firewall.Cond{}, "match on ipset bp of type hash:ip,port"},
		{"not read", 7, 0x02, firewall.Cond{}, "match on ipset with index 7, whose members could not be read"},
	} {
		r := rule(c.index, c.flags)
		if len(r.Conds) != 1 {
			t.Errorf("%s: conds %+v", c.name, r.Conds)
			continue
		}
		got := r.Conds[0]
		if c.reason != "" {
			if got.Kind != firewall.CondUndecidable || !strings.Contains(got.Reason, c.reason) {
				t.Errorf("%s: %+v, want undecidable saying %q", c.name, got, c.reason)
			}
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A hash:net entry flagged nomatch (IPSET_ATTR_CADT_FLAGS, sent in network
// byte order) excludes its prefix: the set is not read as members.
func TestIPSetNomatchEntry(t *testing.T) {
	entry := func(flags uint32) []byte {
		ae := netlink.NewAttributeEncoder()
		ae.Nested(ipsetAttrData, func(d *netlink.AttributeEncoder) error {
			d.Nested(ipsetAttrIP, func(ip *netlink.AttributeEncoder) error {
				ip.Bytes(ipsetAttrIPv4|unix.NLA_F_NET_BYTEORDER, []byte{172, 17, 9, 0})
				return nil
			})
			d.Uint8(ipsetAttrCIDR, 24)
			if flags != 0 {
				d.Bytes(ipsetAttrCadtFlags|unix.NLA_F_NET_BYTEORDER, binary.BigEndian.AppendUint32(nil, flags))
			}
			return nil
		})
		b, _ := ae.Encode()
		return b
	}
	for _, c := range []struct {
		flags   uint32
		unknown bool
	}{{0, false}, {ipsetFlagNomatch, true}} {
		ae := netlink.NewAttributeEncoder()
		ae.String(ipsetAttrSetname, "docker-ext-bridges-v4")
		ae.String(ipsetAttrTypename, "hash:net")
		ae.Bytes(ipsetAttrADT|unix.NLA_F_NESTED, entry(c.flags))
		b, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		s, err := decodeIPSetMsg(b)
		if err != nil {
			t.Fatal(err)
		}
		if (s.Unknown != "") != c.unknown {
			t.Errorf("flags %#x: %+v; want unknown=%v", c.flags, s, c.unknown)
		}
	}
}

// A set of the other family never holds the packet (ip_set_test returns
// 0): "--match-set" fails, "! --match-set" holds.
func TestDecodeIPSetMatchOtherFamily(t *testing.T) {
	v4 := &IPSet{Name: "v4", Type: "hash:net", Family: firewall.FamilyIP, Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	d := Decoder{Family: firewall.FamilyIP6, IPSets: map[uint16]*IPSet{0: v4}}
	for _, c := range []struct {
		flags byte
		never bool
	}{{0x02, true}, {0x03, false}} {
		info := xt.Unknown([]byte{0, 0, 1, c.flags})
		r := d.Rule(&nftables.Rule{Exprs: []expr.Any{&expr.Match{Name: "set", Rev: 1, Info: &info}, &expr.Verdict{Kind: expr.VerdictDrop}}})
		never := len(r.Conds) == 1 && r.Conds[0].Kind == firewall.CondNever
		if never != c.never || !never && len(r.Conds) != 0 {
			t.Errorf("flags %#x on an ip6 rule: %+v; want never=%v (else no condition)", c.flags, r.Conds, c.never)
		}
	}
}
