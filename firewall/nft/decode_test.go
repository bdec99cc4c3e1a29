package nft

import (
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

func le32(v uint32) []byte { b := make([]byte, 4); binary.NativeEndian.PutUint32(b, v); return b }
func be16(v uint16) []byte { b := make([]byte, 2); binary.BigEndian.PutUint16(b, v); return b }

func decodeOne(t *testing.T, fam string, sets map[string]*firewall.Set, exprs ...expr.Any) firewall.Rule {
	t.Helper()
	d := Decoder{Family: fam, Sets: sets, SetsKnown: true}
	return d.Rule(&nftables.Rule{Handle: 7, Exprs: exprs})
}

var (
	l4tcp  = []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{6}}}
	dport0 = &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}
)

func TestDecodeIptablesNftPortAcceptWithComment(t *testing.T) {
	comment := xt.Comment("adoption:n1:foundation:22/tcp")
	exprs := append(append([]expr.Any{}, l4tcp...),
		dport0, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(22)},
		&expr.Match{Name: "comment", Info: &comment},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictAccept})
	r := decodeOne(t, firewall.FamilyIP, nil, exprs...)
	want := firewall.Rule{Handle: 7, Comment: string(comment), Conds: []firewall.Cond{
		{Kind: firewall.CondL4Proto, Protos: []int{6}},
		{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 22, To: 22}}},
	}, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
}

func TestDecodeUserDataComment(t *testing.T) {
	d := Decoder{Family: firewall.FamilyInet, SetsKnown: true}
	r := d.Rule(&nftables.Rule{
		Exprs:    []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}},
		UserData: userdata.AppendString(nil, userdata.TypeComment, "mark"),
	})
	if r.Comment != "mark" || r.Verdict.Kind != firewall.VerdictDrop {
		t.Errorf("got %+v", r)
	}
}

func TestDecodeCtStateNativeAndXt(t *testing.T) {
	r := decodeOne(t, firewall.FamilyInet, nil,
		&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: le32(firewall.CtStateEstablished | firewall.CtStateRelated), Xor: le32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: le32(0)},
		&expr.Verdict{Kind: expr.VerdictAccept})
	if want := []firewall.Cond{{Kind: firewall.CondCtState, Bits: 6}}; !reflect.DeepEqual(r.Conds, want) {
		t.Errorf("native ct state: %+v", r.Conds)
	}
	info := &xt.ConntrackMtinfo3{}
	info.MatchFlags = uint16(xt.ConntrackState)
	info.StateMask = firewall.CtStateNew
	r = decodeOne(t, firewall.FamilyIP, nil, &expr.Match{Name: "conntrack", Rev: 3, Info: info}, &expr.Verdict{Kind: expr.VerdictAccept})
	if want := []firewall.Cond{{Kind: firewall.CondCtState, Bits: firewall.CtStateNew}}; !reflect.DeepEqual(r.Conds, want) {
		t.Errorf("xt conntrack: %+v", r.Conds)
	}
}

func TestDecodeAddrTypeXtAndFib(t *testing.T) {
	r := decodeOne(t, firewall.FamilyIP, nil,
		&expr.Match{Name: "addrtype", Rev: 1, Info: &xt.AddrTypeV1{Dest: uint16(xt.AddrTypeLocal), Flags: xtAddrTypeInvertDest}},
		&expr.Verdict{Kind: expr.VerdictReturn})
	if want := []firewall.Cond{{Kind: firewall.CondAddrType, Addr: "daddr", Bits: 1 << firewall.RtnLocal, Negate: true}}; !reflect.DeepEqual(r.Conds, want) {
		t.Errorf("xt addrtype: %+v", r.Conds)
	}
	r = decodeOne(t, firewall.FamilyInet, nil,
		&expr.Fib{Register: 1, ResultADDRTYPE: true, FlagDADDR: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: le32(firewall.RtnLocal)},
		&expr.Verdict{Kind: expr.VerdictAccept})
	if want := []firewall.Cond{{Kind: firewall.CondAddrType, Addr: "daddr", Bits: 1 << firewall.RtnLocal}}; !reflect.DeepEqual(r.Conds, want) {
		t.Errorf("fib: %+v", r.Conds)
	}
}

func TestDecodeAddressPrefixes(t *testing.T) {
	r := decodeOne(t, firewall.FamilyIP, nil,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 255, 240, 0}, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{192, 0, 16, 0}},
		&expr.Verdict{Kind: expr.VerdictAccept})
	want := []firewall.Cond{
		{Kind: firewall.CondSaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		{Kind: firewall.CondDaddr, Negate: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.16.0/20")}},
	}
	if !reflect.DeepEqual(r.Conds, want) {
		t.Errorf("got %+v", r.Conds)
	}
	// In an inet table a network header load means nothing without nfproto.
	r = decodeOne(t, firewall.FamilyInet, nil,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10, 0, 0, 1}},
		&expr.Verdict{Kind: expr.VerdictAccept})
	if len(r.Conds) != 1 || r.Conds[0].Kind != firewall.CondUndecidable {
		t.Errorf("inet without nfproto: %+v", r.Conds)
	}
}

func TestDecodeIntervalSetAndVMap(t *testing.T) {
	// Kernel dumps of interval sets come in any order; ends are exclusive.
	ports := &firewall.Set{Name: "p", Interval: true, Elements: []firewall.SetElement{
		{Key: be16(6001), IntervalEnd: true}, {Key: be16(6000)},
		{Key: be16(0), IntervalEnd: true},
		{Key: be16(5000)}, {Key: be16(5011), IntervalEnd: true},
		{Key: be16(65000)}, // open to the end
	}}
	acc, jmp := firewall.Verdict{Kind: firewall.VerdictAccept}, firewall.Verdict{Kind: firewall.VerdictJump, Target: "x"}
	vm := &firewall.Set{Name: "__map0", Anonymous: true, IsMap: true, Elements: []firewall.SetElement{
		{Key: be16(22), Verdict: &acc}, {Key: be16(23), Verdict: &jmp},
	}}
	sets := map[string]*firewall.Set{"p": ports, "__map0": vm}
	r := decodeOne(t, firewall.FamilyInet, sets, append(append([]expr.Any{}, l4tcp...), dport0,
		&expr.Lookup{SourceRegister: 1, SetName: "p"}, &expr.Verdict{Kind: expr.VerdictAccept})...)
	want := firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 5000, To: 5010}, {From: 6000, To: 6000}, {From: 65000, To: 65535}}}
	if !reflect.DeepEqual(r.Conds[1], want) {
		t.Errorf("interval set: %+v", r.Conds[1])
	}
	r = decodeOne(t, firewall.FamilyInet, sets, dport0,
		&expr.Lookup{SourceRegister: 1, SetName: "__map0", IsDestRegSet: true, DestRegister: unix.NFT_REG_VERDICT})
	wantVM := []firewall.VMapEntry{{Cond: firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 22, To: 22}}}, Verdict: acc}, {Cond: firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 23, To: 23}}}, Verdict: jmp}}
	if !reflect.DeepEqual(r.VMap, wantVM) {
		t.Errorf("vmap: %+v", r.VMap)
	}
}

func TestDecodeRawVerdict(t *testing.T) {
	// NFTA_VERDICT_CODE (jump = -3) and NFTA_VERDICT_CHAIN "svc", as the
	// kernel nests them in a map element's data.
	b := []byte{8, 0, unix.NFTA_VERDICT_CODE, 0, 0xff, 0xff, 0xff, 0xfd, 8, 0, unix.NFTA_VERDICT_CHAIN, 0, 's', 'v', 'c', 0}
	v, ok := rawVerdict(b)
	if !ok || v != (firewall.Verdict{Kind: firewall.VerdictJump, Target: "svc"}) {
		t.Errorf("got %+v %v", v, ok)
	}
}

func TestDecodeXtMatchesAndTargets(t *testing.T) {
	// -m multiport --dports 9100,9200:9202 (rev 1, host order)
	mp := make([]byte, 48)
	mp[0], mp[1] = 1, 3
	binary.NativeEndian.PutUint16(mp[2:], 9100)
	binary.NativeEndian.PutUint16(mp[4:], 9200)
	binary.NativeEndian.PutUint16(mp[6:], 9202)
	mp[32+1] = 1 // ports[1..2] form a range
	mpInfo := xt.Unknown(mp)
	rt := xt.Unknown(make([]byte, 40))
	cases := []struct {
		name  string
		exprs []expr.Any
		conds []firewall.Cond
		v     firewall.VerdictKind
	}{
		{"multiport", []expr.Any{&expr.Match{Name: "multiport", Rev: 1, Info: &mpInfo}, &expr.Verdict{Kind: expr.VerdictAccept}},
			[]firewall.Cond{{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 9100, To: 9100}, {From: 9200, To: 9202}}}}, firewall.VerdictAccept},
		{"rt never matches", []expr.Any{&expr.Match{Name: "rt", Info: &rt}, &expr.Verdict{Kind: expr.VerdictDrop}},
			[]firewall.Cond{{Kind: firewall.CondNever, Reason: "xt rt match: the packet has no routing header"}}, firewall.VerdictDrop},
		{"LOG is not final", []expr.Any{&expr.Limit{Rate: 3, Unit: expr.LimitTimeMinute}, &expr.Target{Name: "LOG", Info: &rt}},
			[]firewall.Cond{{Kind: firewall.CondUndecidable, Reason: "limit rate 3/60s"}}, firewall.VerdictContinue},
		{"REJECT is final", []expr.Any{&expr.Target{Name: "REJECT", Info: &rt}}, nil, firewall.VerdictReject},
		{"xt tcp", []expr.Any{&expr.Match{Name: "tcp", Info: &xt.Tcp{SrcPorts: [2]uint16{0, 0xffff}, DstPorts: [2]uint16{22, 22}}}, &expr.Verdict{Kind: expr.VerdictAccept}},
			[]firewall.Cond{{Kind: firewall.CondL4Proto, Protos: []int{6}}, {Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 22, To: 22}}}}, firewall.VerdictAccept},
		{"iifname wildcard", []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte("eth")}, &expr.Verdict{Kind: expr.VerdictAccept}},
			[]firewall.Cond{{Kind: firewall.CondIifname, Names: []string{"eth*"}}}, firewall.VerdictAccept},
		{"sport and dport in one word", []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 4}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 67, 0, 68}}, &expr.Verdict{Kind: expr.VerdictAccept}},
			[]firewall.Cond{{Kind: firewall.CondSport, Ports: []firewall.PortRange{{From: 67, To: 67}}}, {Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 68, To: 68}}}}, firewall.VerdictAccept},
		{"register never loaded", []expr.Any{&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{1}}, &expr.Verdict{Kind: expr.VerdictAccept}},
			[]firewall.Cond{{Kind: firewall.CondUndecidable, Reason: "reads register 1 that no decoded expression loaded (google/nftables drops expressions it cannot decode)"}}, firewall.VerdictAccept},
	}
	for _, c := range cases {
		r := decodeOne(t, firewall.FamilyIP, nil, c.exprs...)
		if !reflect.DeepEqual(r.Conds, c.conds) || r.Verdict.Kind != c.v {
			t.Errorf("%s: got conds %+v verdict %v; want %+v %v", c.name, r.Conds, r.Verdict.Kind, c.conds, c.v)
		}
	}
}
