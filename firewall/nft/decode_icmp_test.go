package nft

import (
	"reflect"
	"testing"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"adoption/firewall"
)

// ICMP types decode from xt icmp/icmp6 (type, code range, inversion) and
// from nft's "icmp type" after its protocol dependency; hop limits from xt
// hl and nft's "ip6 hoplimit". Before, an xt icmp match was "never", so a
// ping rule was never evaluated at all.
func TestDecodeICMPTypeAndHopLimit(t *testing.T) {
	icmp := func(b ...byte) *xt.Unknown { u := xt.Unknown(b); return &u }
	l4icmp6 := []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{58}}}
	typ := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1}
	accept := &expr.Verdict{Kind: expr.VerdictAccept}
	cases := []struct {
		name  string
		fam   string
		exprs []expr.Any
		conds []firewall.Cond
	}{
		{"xt icmp echo-request", firewall.FamilyIP, []expr.Any{&expr.Match{Name: "icmp", Info: icmp(8, 0, 255, 0)}, accept},
			[]firewall.Cond{{Kind: firewall.CondICMPType, Types: []int{8}}}},
		{"xt icmp inverted", firewall.FamilyIP, []expr.Any{&expr.Match{Name: "icmp", Info: icmp(8, 0, 255, 1)}, accept},
			[]firewall.Cond{{Kind: firewall.CondICMPType, Types: []int{8}, Negate: true}}},
		{"xt icmp any type", firewall.FamilyIP, []expr.Any{&expr.Match{Name: "icmp", Info: icmp(255, 0, 255, 0)}, accept},
			[]firewall.Cond{{Kind: firewall.CondICMPType}}},
		{"xt icmp6 code 1 only", firewall.FamilyIP6, []expr.Any{&expr.Match{Name: "icmp6", Info: icmp(1, 1, 1, 0)}, accept},
			[]firewall.Cond{{Kind: firewall.CondNever, Reason: "xt icmp match: type 1 codes 1-1"}}},
		{"xt hl eq 255", firewall.FamilyIP6, []expr.Any{&expr.Match{Name: "hl", Info: icmp(0, 255)}, accept},
			[]firewall.Cond{{Kind: firewall.CondHopLimit, Value: 255}}},
		{"nft icmpv6 type", firewall.FamilyInet, append(append([]expr.Any{}, l4icmp6...), typ, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{135}}, accept),
			[]firewall.Cond{{Kind: firewall.CondL4Proto, Protos: []int{58}}, {Kind: firewall.CondICMPType, Types: []int{135}}}},
		{"nft ip6 hoplimit", firewall.FamilyIP6, []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 7, Len: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{255}}, accept},
			[]firewall.Cond{{Kind: firewall.CondHopLimit, Value: 255}}},
	}
	for _, c := range cases {
		r := decodeOne(t, c.fam, nil, c.exprs...)
		if !reflect.DeepEqual(r.Conds, c.conds) {
			t.Errorf("%s: got %+v, want %+v", c.name, r.Conds, c.conds)
		}
	}
	// Without the protocol dependency the first transport byte is not a type.
	r := decodeOne(t, firewall.FamilyInet, nil, typ, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{8}}, accept)
	if len(r.Conds) != 1 || r.Conds[0].Kind != firewall.CondUndecidable {
		t.Errorf("th byte 0 without an ICMP dependency: %+v, want undecidable", r.Conds)
	}
}
