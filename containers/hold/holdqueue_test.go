package hold

// The queue's nfnetlink messages, byte by byte: what the kernel reads
// (config, verdicts) is built to its structs' layout, and what it sends
// (a queued packet's notice) is parsed from bytes laid out as it lays them.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// attr is one netlink attribute: length (4 + payload), type, payload,
// padded to 4 bytes; native endian, as netlink is.
func attr(typ uint16, payload []byte) []byte {
	b := make([]byte, 4, 4+len(payload)+3)
	binary.NativeEndian.PutUint16(b, uint16(4+len(payload)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// genmsg is struct nfgenmsg for queue num: family, version, res_id (big endian).
func genmsg(num uint16) []byte {
	return []byte{unix.AF_UNSPEC, 0, byte(num >> 8), byte(num)}
}

func TestQueueMessages(t *testing.T) {
	const num = 40123
	msgType := func(typ int) netlink.HeaderType { return netlink.HeaderType(unix.NFNL_SUBSYS_QUEUE<<8 | typ) }
	for _, tc := range []struct {
		name  string
		m     netlink.Message
		typ   netlink.HeaderType
		flags netlink.HeaderFlags
		data  []byte
	}{
		{"bind", configCmdMsg(num, nfqnlCfgCmdBind), msgType(2), netlink.Request | netlink.Acknowledge,
			append(genmsg(num), attr(1, []byte{1, 0, 0, 0})...)}, // NFQA_CFG_CMD {cmd BIND, pad, pf 0}
		{"params", configParamsMsg(num), msgType(2), netlink.Request | netlink.Acknowledge,
			append(genmsg(num), attr(2, []byte{0, 0, 0, 0, 1})...)}, // NFQA_CFG_PARAMS {copy_range 0, COPY_META}
		{"accept one", verdictMsg(num, 0x01020304, nfAccept, false), msgType(1), netlink.Request,
			append(genmsg(num), attr(2, []byte{0, 0, 0, 1, 1, 2, 3, 4})...)}, // NFQA_VERDICT_HDR {NF_ACCEPT, id}, big endian
		{"accept up to", verdictMsg(num, 7, nfAccept, true), msgType(3), netlink.Request,
			append(genmsg(num), attr(2, []byte{0, 0, 0, 1, 0, 0, 0, 7})...)},
		{"drop one", verdictMsg(num, 9, nfDrop, false), msgType(1), netlink.Request,
			append(genmsg(num), attr(2, []byte{0, 0, 0, 0, 0, 0, 0, 9})...)},
	} {
		if tc.m.Header.Type != tc.typ || tc.m.Header.Flags != tc.flags {
			t.Errorf("%s: header type %#x flags %v, want %#x %v", tc.name, tc.m.Header.Type, tc.m.Header.Flags, tc.typ, tc.flags)
		}
		if !bytes.Equal(tc.m.Data, tc.data) {
			t.Errorf("%s: data\n% x\nwant\n% x", tc.name, tc.m.Data, tc.data)
		}
	}
}

func TestQueuePacketParsed(t *testing.T) {
	packet := func(num uint16, attrs ...[]byte) netlink.Message {
		data := genmsg(num)
		for _, a := range attrs {
			data = append(data, a...)
		}
		return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_QUEUE<<8 | nfqnlMsgPacket)}, Data: data}
	}
	// NFQA_PACKET_HDR {packet_id be32, hw_protocol be16 (0x0800), hook u8
	// (prerouting)}, after a NFQA_MARK the parser must step over.
	hdr := attr(1, []byte{0, 0, 0x30, 0x39, 0x08, 0x00, 0})
	mark := attr(6, []byte{0, 0, 0, 1})
	num, id, err := packetID(packet(40123, mark, hdr))
	if err != nil || num != 40123 || id != 12345 {
		t.Fatalf("parsed queue %d packet %d (%v), want 40123 12345", num, id, err)
	}
	for name, m := range map[string]netlink.Message{
		"no header":       packet(40123, mark),
		"short header":    packet(40123, attr(1, []byte{0, 0, 1})),
		"short message":   {Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_QUEUE<<8 | nfqnlMsgPacket)}, Data: []byte{0, 0}},
		"truncated attrs": packet(40123, hdr[:6]),
	} {
		if _, _, err := packetID(m); err == nil || errors.Is(err, errNotPacket) {
			t.Errorf("%s: parsed without a malformed-packet error (%v)", name, err)
		}
	}
	for name, typ := range map[string]netlink.HeaderType{
		"an ack":    netlink.Error,
		"a config":  netlink.HeaderType(unix.NFNL_SUBSYS_QUEUE<<8 | nfqnlMsgConfig),
		"conntrack": netlink.HeaderType(unix.NFNL_SUBSYS_CTNETLINK << 8),
	} {
		if _, _, err := packetID(netlink.Message{Header: netlink.Header{Type: typ}, Data: genmsg(1)}); !errors.Is(err, errNotPacket) {
			t.Errorf("%s taken for a queued packet: %v", name, err)
		}
	}
}

func TestQueueNumStable(t *testing.T) {
	a, b := queueNum("svc"), queueNum("svc")
	if a != b || a < 40000 || a > 49999 {
		t.Fatalf("queue numbers %d %d", a, b)
	}
	if queueNum("svc") == queueNum("svc2") && queueNum("svc") == queueNum("svc3") {
		t.Fatal("owners share a queue number")
	}
}
