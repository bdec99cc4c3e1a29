// This file holds the queue that lets a hold go at once: new SYNs queued
// through NFQUEUE while the worker lives, all accepted at the release,
// spoken through nfnetlink directly.

package hold

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

const (
	nfqnlMsgPacket       = 0
	nfqnlMsgConfig       = 2
	nfqnlMsgVerdictBatch = 3
	nfqaPacketHdr        = 1
	nfqaVerdictHdr       = 2
	nfqaCfgCmd           = 1
	nfqaCfgParams        = 2
	nfqnlCfgCmdBind      = 1
	nfqnlCopyMeta        = 1
	nfAccept             = 1
)

// queueNum is owner's queue: a number of its own, in 40000-49999.
func queueNum(owner string) uint16 {
	h := fnv.New32a()
	h.Write([]byte(owner))
	return uint16(40000 + h.Sum32()%10000)
}

// nfq is one bound queue and the highest packet ID it has seen.
type nfq struct {
	num    uint16
	conn   *netlink.Conn
	mu     sync.Mutex
	last   uint32
	seen   bool
	closed bool
	done   chan struct{}
}

func nfqMsg(typ int, num uint16, flags netlink.HeaderFlags, attrs []byte) netlink.Message {
	data := make([]byte, 4, 4+len(attrs))
	data[0] = unix.AF_UNSPEC
	binary.BigEndian.PutUint16(data[2:], num)
	return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_QUEUE<<8 | typ), Flags: flags}, Data: append(data, attrs...)}
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
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, 0})
	b, _ := ae.Encode()
	if _, err := c.Execute(nfqMsg(nfqnlMsgConfig, num, netlink.Request|netlink.Acknowledge, b)); err != nil {
		c.Close()
		return nil, fmt.Errorf("bind queue %d: %w", num, err)
	}
	ae = netlink.NewAttributeEncoder()
	ae.Bytes(nfqaCfgParams, []byte{0, 0, 0, 0, nfqnlCopyMeta}) // copy_range 0, metadata only
	b, _ = ae.Encode()
	if _, err := c.Execute(nfqMsg(nfqnlMsgConfig, num, netlink.Request|netlink.Acknowledge, b)); err != nil {
		c.Close()
		return nil, fmt.Errorf("configure queue %d: %w", num, err)
	}
	q := &nfq{num: num, conn: c, done: make(chan struct{})}
	go q.read()
	return q, nil
}

// read records the ID of every queued packet until the socket closes.
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
			// A full socket buffer (ENOBUFS) loses notifications, not
			// packets: they stay queued and a later verdict covers them.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_QUEUE<<8|nfqnlMsgPacket) || len(m.Data) < 4 {
				continue
			}
			ad, err := netlink.NewAttributeDecoder(m.Data[4:])
			if err != nil {
				continue
			}
			for ad.Next() {
				if ad.Type() == nfqaPacketHdr {
					if b := ad.Bytes(); len(b) >= 4 {
						id := binary.BigEndian.Uint32(b)
						q.mu.Lock()
						if !q.seen || id > q.last {
							q.last, q.seen = id, true
						}
						q.mu.Unlock()
					}
				}
			}
		}
	}
}

// acceptAll lets every packet queued so far go on (one batch verdict: all
// IDs up to the last seen).
func (q *nfq) acceptAll() error {
	q.mu.Lock()
	last, seen := q.last, q.seen
	q.mu.Unlock()
	if !seen {
		return nil
	}
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, nfAccept)
	binary.BigEndian.PutUint32(b[4:], last)
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(nfqaVerdictHdr, b)
	enc, _ := ae.Encode()
	_, err := q.conn.Send(nfqMsg(nfqnlMsgVerdictBatch, q.num, netlink.Request, enc))
	return err
}

// drain lets the queued packets go until no new one has been seen for a
// while: the rules that queue are gone by then, but the notices of packets
// queued just before may still be on their way to the socket, and a packet
// left queued when the socket closes is dropped (its client would wait for
// its retransmission).
func (q *nfq) drain() error {
	if err := q.acceptAll(); err != nil {
		return err
	}
	quiet := 0
	for i := 0; i < 50 && quiet < 3; i++ {
		q.mu.Lock()
		before := q.last
		q.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		q.mu.Lock()
		moved := q.last != before
		q.mu.Unlock()
		if !moved {
			quiet++
			continue
		}
		quiet = 0
		if err := q.acceptAll(); err != nil {
			return err
		}
	}
	return nil
}

func (q *nfq) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.conn.Close()
	<-q.done
}
