package marks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/vocab"
)

func TestMarkCommentRoundTrip(t *testing.T) {
	for _, m := range []Mark{
		{Node: "n1", Owner: "foundation", Port: 9500, Proto: "tcp"},
		{Node: "a", Owner: "b", Port: 1, Proto: "udp"},
		{Node: strings.Repeat("x", 32), Owner: "mod_a-1", Port: 65535, Proto: "tcp"},
	} {
		c := m.Comment()
		got, ok := ParseMark(c)
		if !ok || got != m {
			t.Errorf("ParseMark(%q) = %+v, %v; want %+v", c, got, ok, m)
		}
		if len(c) > MaxCommentLen {
			t.Errorf("comment %q is longer than %d bytes", c, MaxCommentLen)
		}
	}
	if c := (Mark{Node: "n1", Owner: "foundation", Port: 9500, Proto: "tcp"}).Comment(); c != "adoption:n1:foundation:9500/tcp" {
		t.Errorf("Comment = %q", c)
	}
}

func TestParseMarkRejects(t *testing.T) {
	for _, c := range []string{
		"",
		"not-ours",
		"adoption:n1:foundation:9500",
		"adoption:n1:foundation:9500/sctp",
		"adoption:n1:foundation:0/tcp",
		"adoption:n1:foundation:70000/tcp",
		"adoption:n1:foundation:09500/tcp",
		"adoption:n1:foundation:+9500/tcp",
		"adoption:n1:foundation: 9500/tcp",
		"adoption:n1:foundation:9500/tcp ",
		"adoption:n1:foundation:9500/TCP",
		"adoption:n1:foun:dation:9500/tcp",         // ':' in a name
		"adoption:n1:found\"ation:9500/tcp",        // quote
		"adoption:n1:found'ation:9500/tcp",         // quote
		"adoption:n1:found\nation:9500/tcp",        // newline
		"adoption:n1:foundation:9500/tcp\n-j DROP", // injected rule text
		"adoption:N1:foundation:9500/tcp",          // upper case
		"adoption:-n1:foundation:9500/tcp",         // leading '-'
		"adoption:n1-:foundation:9500/tcp",         // trailing '-'
		"adoption::foundation:9500/tcp",            // empty name
		"adoption:n1:" + strings.Repeat("x", 33) + ":9500/tcp",
		"adoption:n1:foundation:9500/tcp:extra",
		"Adoption:n1:foundation:9500/tcp",
		" adoption:n1:foundation:9500/tcp",
	} {
		if m, ok := ParseMark(c); ok {
			t.Errorf("ParseMark(%q) = %+v, want rejected", c, m)
		}
	}
}

// fakeKernel answers google/nftables and the Marker's raw netlink like the
// kernel would for a small fixed ruleset, and records the batches it gets.
type fakeKernel struct {
	t       *testing.T
	gen     uint32
	tables  []fakeTable
	batches [][]netlink.Message
	// refuse, when set, answers the next batch like the kernel answers a
	// stale NFNL_BATCH_GENID: one error for the batch, nothing else.
	refuse unix.Errno
	// failDel answers DELRULE messages with this errno (the batch aborts).
	failDel unix.Errno
	gets    int
	// ruleDumps records each rule dump asked for: "family table chain",
	// "*" for the whole ruleset.
	ruleDumps []string
}

type fakeTable struct {
	family nftables.TableFamily
	name   string
	chains []fakeChain
}

type fakeChain struct {
	name  string
	hook  *nftables.ChainHook
	prio  int32
	drop  bool
	rules []fakeRule
}

type fakeRule struct {
	handle  uint64
	exprs   []expr.Any
	comment string
}

func attrs(t *testing.T, as ...netlink.Attribute) []byte {
	b, err := netlink.MarshalAttributes(as)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func str(s string) []byte { return []byte(s + "\x00") }

func (k *fakeKernel) conn() *nftables.Conn {
	c, err := nftables.New(nftables.WithTestDial(k.dial))
	if err != nil {
		k.t.Fatal(err)
	}
	return c
}

func reply(req netlink.Message, typ netlink.HeaderType, flags netlink.HeaderFlags, data []byte) netlink.Message {
	return netlink.Message{Header: netlink.Header{Type: typ, Flags: flags, Sequence: req.Header.Sequence, PID: req.Header.PID}, Data: data}
}

func ackFor(req netlink.Message, errno unix.Errno) netlink.Message {
	d := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	return reply(req, netlink.Error, 0, d)
}

func (k *fakeKernel) dump(req netlink.Message, typ int, datas [][]byte) []netlink.Message {
	var out []netlink.Message
	for _, d := range datas {
		out = append(out, reply(req, nft.NftMsg(typ), netlink.Multi, d))
	}
	return append(out, reply(req, netlink.Done, netlink.Multi, make([]byte, 4)))
}

func (k *fakeKernel) dial(req []netlink.Message) ([]netlink.Message, error) {
	t := k.t
	if len(req) == 0 {
		t.Errorf("fake kernel: a read with nothing to answer")
		return nil, errors.New("nothing to answer")
	}
	r := req[0]
	switch r.Header.Type {
	case netlink.HeaderType(unix.NFNL_MSG_BATCH_BEGIN):
		k.batches = append(k.batches, req)
		if k.refuse != 0 {
			errno := k.refuse
			k.refuse = 0
			return []netlink.Message{ackFor(r, errno)}, nil
		}
		var echoes, acks []netlink.Message
		failed := false
		for _, m := range req[1 : len(req)-1] {
			errno := unix.Errno(0)
			if m.Header.Type == nft.NftMsg(unix.NFT_MSG_DELRULE) && k.failDel != 0 {
				errno, failed = k.failDel, true
			}
			if m.Header.Type == nft.NftMsg(unix.NFT_MSG_NEWRULE) && m.Header.Flags&unix.NLM_F_ECHO != 0 {
				d := append(append([]byte(nil), m.Data...), attrs(t, netlink.Attribute{Type: unix.NFTA_RULE_HANDLE, Data: binaryutil.BigEndian.PutUint64(100 + uint64(len(echoes)))})...)
				echoes = append(echoes, reply(m, m.Header.Type, 0, d))
			}
			// As nfnetlink does: an error always, an acknowledgement
			// when asked for.
			if m.Header.Flags&netlink.Acknowledge != 0 || errno != 0 {
				acks = append(acks, ackFor(m, errno))
			}
		}
		k.failDel = 0
		if failed {
			return acks, nil
		}
		k.gen++
		return append(echoes, acks...), nil
	case nft.NftMsg(unix.NFT_MSG_GETGEN):
		k.gets++
		return []netlink.Message{reply(r, nft.NftMsg(unix.NFT_MSG_NEWGEN), 0, append([]byte{0, 0, 0, 0},
			attrs(t, netlink.Attribute{Type: unix.NFTA_GEN_ID, Data: binaryutil.BigEndian.PutUint32(k.gen)})...))}, nil
	case nft.NftMsg(unix.NFT_MSG_GETTABLE):
		var ds [][]byte
		for _, tb := range k.tables {
			ds = append(ds, append([]byte{byte(tb.family), 0, 0, 0}, attrs(t,
				netlink.Attribute{Type: unix.NFTA_TABLE_NAME, Data: str(tb.name)},
				netlink.Attribute{Type: unix.NFTA_TABLE_FLAGS, Data: binaryutil.BigEndian.PutUint32(0)})...))
		}
		return k.dump(r, unix.NFT_MSG_NEWTABLE, ds), nil
	case nft.NftMsg(unix.NFT_MSG_GETCHAIN):
		var ds [][]byte
		for _, tb := range k.tables {
			for _, ch := range tb.chains {
				as := []netlink.Attribute{
					{Type: unix.NFTA_CHAIN_TABLE, Data: str(tb.name)},
					{Type: unix.NFTA_CHAIN_NAME, Data: str(ch.name)},
				}
				if ch.hook != nil {
					as = append(as,
						netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_CHAIN_HOOK, Data: attrs(t,
							netlink.Attribute{Type: unix.NFTA_HOOK_HOOKNUM, Data: binaryutil.BigEndian.PutUint32(uint32(*ch.hook))},
							netlink.Attribute{Type: unix.NFTA_HOOK_PRIORITY, Data: binaryutil.BigEndian.PutUint32(uint32(ch.prio))})},
						netlink.Attribute{Type: unix.NFTA_CHAIN_POLICY, Data: binaryutil.BigEndian.PutUint32(map[bool]uint32{true: 0, false: 1}[ch.drop])},
						netlink.Attribute{Type: unix.NFTA_CHAIN_TYPE, Data: str("filter")})
				}
				ds = append(ds, append([]byte{byte(tb.family), 0, 0, 0}, attrs(t, as...)...))
			}
		}
		return k.dump(r, unix.NFT_MSG_NEWCHAIN, ds), nil
	case nft.NftMsg(unix.NFT_MSG_GETSET):
		return k.dump(r, unix.NFT_MSG_NEWSET, nil), nil
	case nft.NftMsg(unix.NFT_MSG_GETRULE):
		fam := nftables.TableFamily(r.Data[0])
		var table, chain string
		ad, _ := netlink.NewAttributeDecoder(r.Data[4:])
		for ad.Next() {
			switch ad.Type() {
			case unix.NFTA_RULE_TABLE:
				table = ad.String()
			case unix.NFTA_RULE_CHAIN:
				chain = ad.String()
			}
		}
		if table == "" && chain == "" {
			k.ruleDumps = append(k.ruleDumps, "*")
		} else {
			k.ruleDumps = append(k.ruleDumps, fmt.Sprintf("%d %s %s", fam, table, chain))
		}
		var ds [][]byte
		for _, tb := range k.tables {
			for _, ch := range tb.chains {
				// A dump without table and chain (of family AF_UNSPEC: every
				// family) lists every rule, as the kernel does.
				if (fam != unix.AF_UNSPEC && tb.family != fam) || (table != "" && tb.name != table) || (chain != "" && ch.name != chain) {
					continue
				}
				for _, ru := range ch.rules {
					var elems []netlink.Attribute
					for _, e := range ru.exprs {
						b, err := expr.Marshal(byte(tb.family), e)
						if err != nil {
							t.Fatal(err)
						}
						elems = append(elems, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: b})
					}
					as := []netlink.Attribute{
						{Type: unix.NFTA_RULE_TABLE, Data: str(tb.name)},
						{Type: unix.NFTA_RULE_CHAIN, Data: str(ch.name)},
						{Type: unix.NFTA_RULE_HANDLE, Data: binaryutil.BigEndian.PutUint64(ru.handle)},
						{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: attrs(t, elems...)},
					}
					if ru.comment != "" {
						as = append(as, netlink.Attribute{Type: unix.NFTA_RULE_USERDATA, Data: userdata.AppendString(nil, userdata.TypeComment, ru.comment)})
					}
					ds = append(ds, append([]byte{byte(tb.family), 0, 0, 0}, attrs(t, as...)...))
				}
			}
		}
		return k.dump(r, unix.NFT_MSG_NEWRULE, ds), nil
	}
	t.Errorf("fake kernel: unexpected message type %#x", r.Header.Type)
	return []netlink.Message{ackFor(r, unix.EOPNOTSUPP)}, nil
}

func tcpDport(port uint16, v expr.VerdictKind) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Verdict{Kind: v},
	}
}

// ufwKernel is a ufw node reduced to what matters here: INPUT jumps to the
// user chain, which allows 22/tcp; policy drop.
func ufwKernel(t *testing.T) *fakeKernel {
	input := nftables.ChainHookInput
	return &fakeKernel{t: t, gen: 7, tables: []fakeTable{
		{family: nftables.TableFamilyIPv4, name: "filter", chains: []fakeChain{
			{name: "INPUT", hook: input, drop: true, rules: []fakeRule{{handle: 2, exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictJump, Chain: "ufw-user-input"}}}}},
			{name: "ufw-user-input", rules: []fakeRule{{handle: 5, exprs: tcpDport(22, expr.VerdictAccept)}}},
		}},
		{family: nftables.TableFamilyIPv6, name: "filter", chains: []fakeChain{
			{name: "INPUT", hook: input, drop: true, rules: []fakeRule{{handle: 2, exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictJump, Chain: "ufw6-user-input"}}}}},
			{name: "ufw6-user-input", rules: []fakeRule{{handle: 5, exprs: tcpDport(22, expr.VerdictAccept)}}},
		}},
	}}
}

// ruleMsg is a NEWRULE or DELRULE message taken apart.
type ruleMsg struct {
	family     byte
	flags      netlink.HeaderFlags
	table      string
	chain      string
	handle     uint64
	position   uint64
	hasPos     bool
	exprs      []netlink.Attribute // NFTA_LIST_ELEM payloads
	userdata   []byte
	typ        netlink.HeaderType
	rawExprBuf []byte
}

func parseRuleMsg(t *testing.T, m netlink.Message) ruleMsg {
	t.Helper()
	rm := ruleMsg{family: m.Data[0], flags: m.Header.Flags, typ: m.Header.Type}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		t.Fatal(err)
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_RULE_TABLE:
			rm.table = ad.String()
		case unix.NFTA_RULE_CHAIN:
			rm.chain = ad.String()
		case unix.NFTA_RULE_HANDLE:
			rm.handle = ad.Uint64()
		case unix.NFTA_RULE_POSITION:
			rm.position, rm.hasPos = ad.Uint64(), true
		case unix.NFTA_RULE_USERDATA:
			rm.userdata = ad.Bytes()
		case unix.NFTA_RULE_EXPRESSIONS:
			rm.rawExprBuf = ad.Bytes()
			ed, err := netlink.NewAttributeDecoder(rm.rawExprBuf)
			if err != nil {
				t.Fatal(err)
			}
			for ed.Next() {
				rm.exprs = append(rm.exprs, netlink.Attribute{Type: ed.Type(), Data: ed.Bytes()})
			}
		}
	}
	return rm
}

// wantExprs is the expression list nft itself sends for
// "meta l4proto P th dport N counter accept" (nft --debug=netlink:
// meta load l4proto => reg 1; cmp eq reg 1 P; payload load 2b @ transport
// header + 2 => reg 1; cmp eq reg 1 N; counter; immediate reg 0 accept).
func wantExprs(t *testing.T, fam byte, proto byte, port uint16) []byte {
	t.Helper()
	var elems []netlink.Attribute
	for _, e := range []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(port >> 8), byte(port)}},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictAccept},
	} {
		b, err := expr.Marshal(fam, e)
		if err != nil {
			t.Fatal(err)
		}
		elems = append(elems, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: b})
	}
	return attrs(t, elems...)
}

func exprNames(t *testing.T, rm ruleMsg) []string {
	var names []string
	for _, e := range rm.exprs {
		ad, err := netlink.NewAttributeDecoder(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		for ad.Next() {
			if ad.Type() == unix.NFTA_EXPR_NAME {
				names = append(names, ad.String())
			}
		}
	}
	return names
}

func batchGenID(t *testing.T, begin netlink.Message) (uint32, bool) {
	t.Helper()
	if len(begin.Data) < 4 || begin.Header.Type != netlink.HeaderType(unix.NFNL_MSG_BATCH_BEGIN) {
		t.Fatalf("first batch message %v is not a batch begin", begin.Header)
	}
	if res := binary.BigEndian.Uint16(begin.Data[2:4]); res != unix.NFNL_SUBSYS_NFTABLES {
		t.Errorf("batch begin res_id = %d, want NFNL_SUBSYS_NFTABLES", res)
	}
	ad, err := netlink.NewAttributeDecoder(begin.Data[4:])
	if err != nil {
		t.Fatal(err)
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		if ad.Type() == unix.NFNL_BATCH_GENID {
			return ad.Uint32(), true
		}
	}
	return 0, false
}

func TestOpenBatchBytesUfw(t *testing.T) {
	k := ufwKernel(t)
	m := NewMarkerWithConn(k.conn())
	added, present, err := m.Open("n1", "foundation", []vocab.Port{{Num: 9500, Proto: "tcp"}, {Num: 53, Proto: "udp"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(present) != 0 || len(added) != 4 {
		t.Fatalf("added %v present %v, want 4 added", added, present)
	}
	if len(k.batches) != 1 {
		t.Fatalf("%d batches sent, want exactly one", len(k.batches))
	}
	b := k.batches[0]
	if gen, ok := batchGenID(t, b[0]); !ok || gen != 7 {
		t.Errorf("batch generation = %d, %v; want 7, the generation listed", gen, ok)
	}
	if b[len(b)-1].Header.Type != netlink.HeaderType(unix.NFNL_MSG_BATCH_END) {
		t.Errorf("last message is not a batch end")
	}
	body := b[1 : len(b)-1]
	if len(body) != 4 {
		t.Fatalf("batch carries %d messages, want 4 rule insertions", len(body))
	}
	// Head insertions are queued last port first so the chain lists them
	// in the order asked.
	want := []struct {
		fam   byte
		chain string
		proto byte
		port  uint16
		cmt   string
	}{
		{unix.NFPROTO_IPV6, "ufw6-user-input", unix.IPPROTO_UDP, 53, "adoption:n1:foundation:53/udp"},
		{unix.NFPROTO_IPV4, "ufw-user-input", unix.IPPROTO_UDP, 53, "adoption:n1:foundation:53/udp"},
		{unix.NFPROTO_IPV6, "ufw6-user-input", unix.IPPROTO_TCP, 9500, "adoption:n1:foundation:9500/tcp"},
		{unix.NFPROTO_IPV4, "ufw-user-input", unix.IPPROTO_TCP, 9500, "adoption:n1:foundation:9500/tcp"},
	}
	for i, msg := range body {
		rm := parseRuleMsg(t, msg)
		w := want[i]
		if rm.typ != nft.NftMsg(unix.NFT_MSG_NEWRULE) || rm.family != w.fam || rm.table != "filter" || rm.chain != w.chain {
			t.Errorf("message %d: type %#x family %d %s %s, want NEWRULE family %d filter %s", i, rm.typ, rm.family, rm.table, rm.chain, w.fam, w.chain)
		}
		// Insert at the chain's head: no position, no append flag.
		if rm.hasPos || rm.flags&unix.NLM_F_APPEND != 0 || rm.flags&netlink.Create == 0 || rm.flags&unix.NLM_F_ECHO == 0 {
			t.Errorf("message %d: position %v/%d flags %v; want an insertion at the head with create and echo", i, rm.hasPos, rm.position, rm.flags)
		}
		if got := exprNames(t, rm); strings.Join(got, ",") != "meta,cmp,payload,cmp,counter,immediate" {
			t.Errorf("message %d: expressions %v", i, got)
		}
		if wb := wantExprs(t, w.fam, w.proto, w.port); !bytes.Equal(rm.rawExprBuf, wb) {
			t.Errorf("message %d: expression bytes\n got %x\nwant %x", i, rm.rawExprBuf, wb)
		}
		// NFTNL_UDATA_RULE_COMMENT: type 0, length, the comment and its NUL.
		wantUD := append([]byte{0, byte(len(w.cmt) + 1)}, append([]byte(w.cmt), 0)...)
		if !bytes.Equal(rm.userdata, wantUD) {
			t.Errorf("message %d: userdata %q, want %q", i, rm.userdata, wantUD)
		}
	}
	for _, r := range added {
		if r.Handle < 100 {
			t.Errorf("added %v without the handle the kernel echoed", r)
		}
	}
}

func TestOpenBatchBytesNative(t *testing.T) {
	input := nftables.ChainHookInput
	ctState := func(bits uint32, v expr.VerdictKind) []expr.Any {
		return []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binary.NativeEndian.AppendUint32(nil, bits), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
			&expr.Verdict{Kind: v},
		}
	}
	k := &fakeKernel{t: t, gen: 3, tables: []fakeTable{{family: nftables.TableFamilyINet, name: "host", chains: []fakeChain{
		{name: "input", hook: input, drop: true, rules: []fakeRule{
			{handle: 2, exprs: ctState(firewall.CtStateEstablished|firewall.CtStateRelated, expr.VerdictAccept)},
			{handle: 3, exprs: ctState(firewall.CtStateInvalid, expr.VerdictDrop)},
			{handle: 4, exprs: tcpDport(22, expr.VerdictAccept)},
			{handle: 5, exprs: tcpDport(2222, expr.VerdictDrop)},
			{handle: 6, exprs: tcpDport(8080, expr.VerdictAccept), comment: "adoption:n1:web:8080/tcp"},
		}},
		{name: "DOCKER-USER", hook: input, drop: true},
	}}}}
	m := NewMarkerWithConn(k.conn())
	added, present, err := m.Open("n1", "web", []vocab.Port{{Num: 2222, Proto: "tcp"}, {Num: 9000, Proto: "tcp"}, {Num: 8080, Proto: "tcp"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 2 || len(present) != 1 || present[0].Handle != 6 {
		t.Fatalf("added %v present %v; want 2 added and the 8080 mark present", added, present)
	}
	body := k.batches[0][1 : len(k.batches[0])-1]
	if len(body) != 2 {
		t.Fatalf("batch carries %d messages, want 2", len(body))
	}
	// 2222/tcp: before the rule that drops it (handle 5), after the ct rules.
	r0 := parseRuleMsg(t, body[0])
	if r0.family != unix.NFPROTO_INET || r0.chain != "input" || !r0.hasPos || r0.position != 5 || r0.flags&unix.NLM_F_APPEND != 0 {
		t.Errorf("2222/tcp: family %d chain %s position %v/%d flags %v; want inet input inserted before handle 5", r0.family, r0.chain, r0.hasPos, r0.position, r0.flags)
	}
	// 9000/tcp: nothing drops it but the policy: appended.
	r1 := parseRuleMsg(t, body[1])
	if r1.hasPos || r1.flags&unix.NLM_F_APPEND == 0 {
		t.Errorf("9000/tcp: position %v flags %v; want appended", r1.hasPos, r1.flags)
	}
}

func TestOpenRefusesStaleGeneration(t *testing.T) {
	k := ufwKernel(t)
	k.refuse = unix.ERESTART
	_, _, err := NewMarkerWithConn(k.conn()).Open("n1", "foundation", []vocab.Port{{Num: 9500, Proto: "tcp"}})
	if !errors.Is(err, nft.ErrRulesetChanged) || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("Open against a changed ruleset: %v; want ErrRulesetChanged", err)
	}
}

func TestOpenValidatesFirst(t *testing.T) {
	k := ufwKernel(t)
	m := NewMarkerWithConn(k.conn())
	for _, c := range []struct {
		node, owner string
		ports       []vocab.Port
		want        string
	}{
		{"n1", "found:ation", []vocab.Port{{Num: 1, Proto: "tcp"}}, `owner name "found:ation"`},
		{"N1", "a", []vocab.Port{{Num: 1, Proto: "tcp"}}, `node name "N1"`},
		{"n1", "a\"b", []vocab.Port{{Num: 1, Proto: "tcp"}}, `owner name "a\"b"`},
		{"n1", "a\nb", []vocab.Port{{Num: 1, Proto: "tcp"}}, `owner name "a\nb"`},
		{"n1", "a", []vocab.Port{{Num: 0, Proto: "tcp"}}, "port 0/tcp"},
		{"n1", "a", []vocab.Port{{Num: 80, Proto: "sctp"}}, `protocol "sctp"`},
		{"n1", "", []vocab.Port{{Num: 80, Proto: "tcp"}}, "owner name is empty"},
	} {
		_, _, err := m.Open(c.node, c.owner, c.ports)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("Open(%q, %q, %v) = %v; want an error naming %s", c.node, c.owner, c.ports, err, c.want)
		}
	}
	if k.gets != 0 || len(k.batches) != 0 {
		t.Errorf("invalid input reached the kernel: %d generation reads, %d batches", k.gets, len(k.batches))
	}
	// 70000 cannot be a uint16; the config's parser refuses it.
	if _, err := vocab.ParsePort("70000/tcp"); err == nil {
		t.Error("vocab.ParsePort accepts 70000/tcp")
	}
}

func TestCloseDeletesOwnMarksByHandle(t *testing.T) {
	k := ufwKernel(t)
	uin := &k.tables[0].chains[1]
	uin.rules = append([]fakeRule{
		{handle: 10, exprs: tcpDport(9500, expr.VerdictAccept), comment: "adoption:n1:alpha:9500/tcp"},
		{handle: 11, exprs: tcpDport(9500, expr.VerdictAccept), comment: "adoption:n1:beta:9500/tcp"},
		{handle: 12, exprs: tcpDport(9500, expr.VerdictAccept), comment: "not-ours"},
		{handle: 13, exprs: tcpDport(9500, expr.VerdictAccept)},
		{handle: 14, exprs: tcpDport(9500, expr.VerdictAccept), comment: "adoption:n2:alpha:9500/tcp"},
	}, uin.rules...)
	// The first batch fails as when a rule vanished: listed again, retried.
	k.failDel = unix.ENOENT
	m := NewMarkerWithConn(k.conn())
	removed, err := m.Close("n1", "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Handle != 10 || removed[0].Mark.Owner != "alpha" {
		t.Fatalf("removed %v, want only alpha's rule, handle 10", removed)
	}
	if len(k.batches) != 2 {
		t.Fatalf("%d batches, want a failed one and its retry", len(k.batches))
	}
	for _, b := range k.batches {
		body := b[1 : len(b)-1]
		if len(body) != 1 {
			t.Fatalf("batch carries %d messages, want 1", len(body))
		}
		rm := parseRuleMsg(t, body[0])
		if rm.typ != nft.NftMsg(unix.NFT_MSG_DELRULE) || rm.handle != 10 || rm.chain != "ufw-user-input" || rm.family != unix.NFPROTO_IPV4 || len(rm.exprs) != 0 {
			t.Errorf("delete message %+v, want DELRULE ip filter ufw-user-input handle 10 without expressions", rm)
		}
	}
	removed, err = m.Release("n1")
	if err != nil || len(removed) != 2 {
		t.Fatalf("Release: %v, %v; want alpha's (still listed by the fake) and beta's", removed, err)
	}
}

// Open lists the rules of the chains a mark may go to, of the base chains
// at prerouting and input (where the found restriction of the port is
// read), and of the chains they jump to (none here), and no other; Close finds the marks in one dump
// of every rule; each batch asks for one acknowledgement, of its last
// message.
func TestMarkListsOnlyWhatItNeeds(t *testing.T) {
	k := ufwKernel(t)
	m := NewMarkerWithConn(k.conn())
	if _, _, err := m.Open("n1", "foundation", []vocab.Port{{Num: 9500, Proto: "tcp"}, {Num: 53, Proto: "udp"}}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d filter INPUT,%d filter ufw-user-input,%d filter INPUT,%d filter ufw6-user-input", unix.NFPROTO_IPV4, unix.NFPROTO_IPV4, unix.NFPROTO_IPV6, unix.NFPROTO_IPV6)
	if got := strings.Join(k.ruleDumps, ","); got != want {
		t.Errorf("Open dumped the rules of %q, want only %q", got, want)
	}
	k.ruleDumps = nil
	if _, err := m.Close("n1", "foundation"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.ruleDumps, ","); got != "*" {
		t.Errorf("Close dumped the rules of %q, want one dump of every rule", got)
	}
	for i, b := range k.batches {
		for j, msg := range b {
			last := j == len(b)-2
			if acked := msg.Header.Flags&netlink.Acknowledge != 0; acked != last {
				t.Errorf("batch %d message %d of %d: acknowledgement asked %v, want it of the last message only", i, j, len(b), acked)
			}
		}
	}
}

// A chain a mark may go to is listed with the chains it jumps to, and a
// jump into a chain of source denies counts as one: in ufw's input chain
// the mark goes after "jump blocklist" (handle 6), before the next rule.
func TestOpenListsWhatTheMarkChainJumpsTo(t *testing.T) {
	input := nftables.ChainHookInput
	k := &fakeKernel{t: t, gen: 4, tables: []fakeTable{{family: nftables.TableFamilyIPv4, name: "filter", chains: []fakeChain{
		{name: "INPUT", hook: input, drop: true, rules: []fakeRule{{handle: 2, exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "ufw-user-input"}}}}},
		{name: "ufw-user-input", rules: []fakeRule{
			{handle: 5, exprs: tcpDport(22, expr.VerdictAccept)},
			{handle: 6, exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "blocklist"}}},
			{handle: 7, exprs: tcpDport(80, expr.VerdictAccept)},
		}},
		{name: "blocklist", rules: []fakeRule{{handle: 8, exprs: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{198, 18, 0, 3}},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}}}},
		{name: "ufw-before-input"},
	}}}}
	m := NewMarkerWithConn(k.conn())
	if _, _, err := m.Open("n1", "foundation", []vocab.Port{{Num: 9500, Proto: "tcp"}}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d filter INPUT,%d filter ufw-user-input,%d filter blocklist", unix.NFPROTO_IPV4, unix.NFPROTO_IPV4, unix.NFPROTO_IPV4)
	if got := strings.Join(k.ruleDumps, ","); got != want {
		t.Errorf("Open dumped the rules of %q, want %q", got, want)
	}
	body := k.batches[0][1 : len(k.batches[0])-1]
	if len(body) != 1 {
		t.Fatalf("batch carries %d messages, want 1", len(body))
	}
	if rm := parseRuleMsg(t, body[0]); rm.chain != "ufw-user-input" || !rm.hasPos || rm.position != 7 {
		t.Errorf("mark in %s at position %v/%d; want ufw-user-input before handle 7", rm.chain, rm.hasPos, rm.position)
	}
}

// The marks are found in one dump of every rule: the mesh's own table
// (whose port rules carry the same comments after a flip) and tables of
// families other than ip, ip6 and inet are not the found firewall's.
func TestFindMarksOnlyInTheFoundFirewall(t *testing.T) {
	k := ufwKernel(t)
	mark := "adoption:n1:alpha:9500/tcp"
	uin := &k.tables[0].chains[1]
	uin.rules = append(uin.rules, fakeRule{handle: 10, exprs: tcpDport(9500, expr.VerdictAccept), comment: mark})
	k.tables = append(k.tables,
		fakeTable{family: nftables.TableFamilyINet, name: firewall.MeshTable, chains: []fakeChain{
			{name: "ports", rules: []fakeRule{{handle: 3, exprs: tcpDport(9500, expr.VerdictAccept), comment: mark}}},
		}},
		fakeTable{family: nftables.TableFamilyBridge, name: "filter", chains: []fakeChain{
			{name: "forward", rules: []fakeRule{{handle: 4, exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}, comment: mark}}},
		}},
	)
	m := NewMarkerWithConn(k.conn())
	list, err := m.List("n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Family != firewall.FamilyIP || list[0].Chain != "ufw-user-input" || list[0].Handle != 10 {
		t.Fatalf("List = %v; want only ip filter ufw-user-input handle 10", list)
	}
	removed, err := m.Release("n1")
	if err != nil || len(removed) != 1 || removed[0].Handle != 10 {
		t.Fatalf("Release = %v, %v; want only handle 10", removed, err)
	}
	if len(k.batches) != 1 || len(k.batches[0]) != 3 {
		t.Fatalf("batches %v; want one deleting one rule", k.batches)
	}
}
