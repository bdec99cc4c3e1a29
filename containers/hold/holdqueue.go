// This file holds the queue that lets a hold go at once: new SYNs queued
// through NFQUEUE while the worker lives, all accepted at the release,
// spoken through nfnetlink directly. The few messages it needs are built
// and parsed by the functions below, so they are tested byte by byte.

package hold

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nfnetlink_queue's message types and attributes (linux/netfilter/nfnetlink_queue.h).
const (
	nfqnlMsgPacket       = 0
	nfqnlMsgVerdict      = 1
	nfqnlMsgConfig       = 2
	nfqnlMsgVerdictBatch = 3
	nfqaPacketHdr        = 1
	nfqaVerdictHdr       = 2
	nfqaCfgCmd           = 1
	nfqaCfgParams        = 2
	nfqnlCfgCmdBind      = 1
	nfqnlCopyMeta        = 1
	nfAccept             = 1
	nfDrop               = 0
)

// queueNum is owner's queue: a number of its own, in 40000-49999.
func queueNum(owner string) uint16 {
	h := fnv.New32a()
	h.Write([]byte(owner))
	return uint16(40000 + h.Sum32()%10000)
}

// nfqMsg is a nfnetlink_queue message of type typ for queue num: the
// nfgenmsg header (family AF_UNSPEC, version 0, resource id = num, big
// endian) then attrs.
func nfqMsg(typ int, num uint16, flags netlink.HeaderFlags, attrs []byte) netlink.Message {
	data := make([]byte, 4, 4+len(attrs))
	data[0] = unix.AF_UNSPEC
	binary.BigEndian.PutUint16(data[2:], num)
	return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_QUEUE<<8 | typ), Flags: flags}, Data: append(data, attrs...)}
}

// configCmdMsg binds (or unbinds) this socket to queue num: struct
// nfqnl_msg_config_cmd {u8 command; u8 pad; be16 pf}.
func configCmdMsg(num uint16, cmd uint8) netlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(nfqaCfgCmd, []byte{cmd, 0, 0, 0})
	b, _ := ae.Encode()
	return nfqMsg(nfqnlMsgConfig, num, netlink.Request|netlink.Acknowledge, b)
}

// configParamsMsg asks for the packets' metadata only: struct
// nfqnl_msg_config_params {be32 copy_range; u8 copy_mode} (packed).
func configParamsMsg(num uint16) netlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(nfqaCfgParams, []byte{0, 0, 0, 0, nfqnlCopyMeta})
	b, _ := ae.Encode()
	return nfqMsg(nfqnlMsgConfig, num, netlink.Request|netlink.Acknowledge, b)
}

// verdictMsg gives verdict to packet id alone (batch false) or to every
// packet queued up to and including id (batch true): struct
// nfqnl_msg_verdict_hdr {be32 verdict; be32 id}.
func verdictMsg(num uint16, id, verdict uint32, batch bool) netlink.Message {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, verdict)
	binary.BigEndian.PutUint32(b[4:], id)
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(nfqaVerdictHdr, b)
	enc, _ := ae.Encode()
	typ := nfqnlMsgVerdict
	if batch {
		typ = nfqnlMsgVerdictBatch
	}
	return nfqMsg(typ, num, netlink.Request, enc)
}

// errNotPacket is packetID's answer for a message that is not a queued
// packet's notice (an ack, an error, another subsystem's).
var errNotPacket = errors.New("not a queued packet")

// packetID reads a queued packet's notice: its queue and the packet's ID
// (NFQA_PACKET_HDR: struct nfqnl_msg_packet_hdr {be32 packet_id; be16
// hw_protocol; u8 hook}).
func packetID(m netlink.Message) (num uint16, id uint32, err error) {
	if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_QUEUE<<8|nfqnlMsgPacket) {
		return 0, 0, errNotPacket
	}
	if len(m.Data) < 4 {
		return 0, 0, fmt.Errorf("queued packet: %d bytes, shorter than its nfgenmsg header", len(m.Data))
	}
	num = binary.BigEndian.Uint16(m.Data[2:4])
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return 0, 0, fmt.Errorf("queued packet: %w", err)
	}
	for ad.Next() {
		if ad.Type() != nfqaPacketHdr {
			continue
		}
		b := ad.Bytes()
		if len(b) < 7 {
			return 0, 0, fmt.Errorf("queued packet: packet header of %d bytes, want 7", len(b))
		}
		return num, binary.BigEndian.Uint32(b), nil
	}
	if err := ad.Err(); err != nil {
		return 0, 0, fmt.Errorf("queued packet: %w", err)
	}
	return 0, 0, errors.New("queued packet without a packet header")
}

// nfq is one bound queue: the packets it holds until released, and, once
// released, every packet that still reaches it accepted as it arrives.
type nfq struct {
	num      uint16
	conn     *netlink.Conn
	mu       sync.Mutex
	last     uint32
	seen     bool
	released bool
	closed   bool
	sendErr  error
	done     chan struct{}
}

// openQueue binds queue num in the namespace at netnsPath ("" for the own).
func openQueue(netnsPath string, num uint16) (*nfq, error) {
	cfg := &netlink.Config{}
	if netnsPath != "" {
		f, err := os.Open(netnsPath)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cfg.NetNS = int(f.Fd())
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("netfilter netlink: %w", err)
	}
	// A full socket buffer must not end the reader: notices are lost,
	// packets are not (a later batch verdict covers them).
	_ = c.SetOption(netlink.NoENOBUFS, true)
	if _, err := c.Execute(configCmdMsg(num, nfqnlCfgCmdBind)); err != nil {
		c.Close()
		return nil, fmt.Errorf("bind queue %d: %w", num, err)
	}
	if _, err := c.Execute(configParamsMsg(num)); err != nil {
		c.Close()
		return nil, fmt.Errorf("configure queue %d: %w", num, err)
	}
	q := &nfq{num: num, conn: c, done: make(chan struct{})}
	go q.read()
	return q, nil
}

// read records the ID of every queued packet until the socket closes;
// after the release it accepts each one at once.
func (q *nfq) read() {
	defer close(q.done)
	for {
		msgs, err := q.conn.Receive()
		if err != nil {
			q.mu.Lock()
			closed := q.closed
			q.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(time.Millisecond)
			continue
		}
		for _, m := range msgs {
			num, id, err := packetID(m)
			if err != nil || num != q.num {
				continue
			}
			q.mu.Lock()
			if !q.seen || id > q.last {
				q.last, q.seen = id, true
			}
			released := q.released
			q.mu.Unlock()
			if released {
				q.send(verdictMsg(q.num, id, nfAccept, false))
			}
		}
	}
}

func (q *nfq) send(m netlink.Message) {
	if _, err := q.conn.Send(m); err != nil {
		q.mu.Lock()
		if q.sendErr == nil {
			q.sendErr = err
		}
		q.mu.Unlock()
	}
}

// release accepts every packet queued so far (one batch verdict: all IDs
// up to the last seen) and, from now on, each new one as it arrives.
func (q *nfq) release() error {
	q.mu.Lock()
	q.released = true
	last, seen := q.last, q.seen
	q.mu.Unlock()
	if seen {
		q.send(verdictMsg(q.num, last, nfAccept, true))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sendErr
}

// drain waits until no new packet has been seen for a while, each accepted
// by the reader as it comes: the rules that queue are gone by then, but the
// notices of packets queued just before may still be on their way, and a
// packet left queued when the socket closes is dropped (its client would
// wait for its retransmission). A last batch verdict covers notices lost.
func (q *nfq) drain() error {
	quiet := 0
	for i := 0; i < 50 && quiet < 3; i++ {
		q.mu.Lock()
		before := q.last
		q.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		q.mu.Lock()
		moved := q.last != before
		q.mu.Unlock()
		if moved {
			quiet = 0
		} else {
			quiet++
		}
	}
	return q.release()
}

func (q *nfq) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.conn.Close()
	<-q.done
}
