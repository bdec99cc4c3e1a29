// This file holds the netlink transaction every write goes through: list
// at a known ruleset generation, send one batch the kernel applies only at
// that generation, all or nothing, and read back the handles it echoes.

package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// ErrRulesetChanged is returned (wrapped) when the ruleset changed between
// the listing a write was planned on and the write. The kernel refused the
// whole batch, so nothing was changed; running the operation again plans it
// on the new ruleset.
var ErrRulesetChanged = errors.New("the ruleset changed between listing and writing")

// ErrOutcomeUnknown is wrapped when a batch was sent but the kernel's
// answer was lost (ENOBUFS, a timeout): it may or may not be in force.
var ErrOutcomeUnknown = errors.New("whether the batch was applied is not known")

// session is one operation's connections: one nftables connection that
// stays open for the whole operation (every listing goes through the same
// socket), and one raw netlink socket for the generation and the batch.
// Dialling into a namespace costs a locked thread and two setns calls, so
// an operation that dialled per request paid that for every chain listed.
type Session struct {
	netns string // the namespace dialled, when conn was not given
	given bool   // c was given by the caller (tests), not dialled
	c     *nftables.Conn
	nc    *netlink.Conn // the raw socket, dialled on first use
	Close func() error
}

// openSession opens a session on conn, or when conn is nil on a lasting
// connection dialled into the namespace at netnsPath.
func OpenSession(netnsPath string, conn *nftables.Conn) (*Session, error) {
	if conn != nil {
		s := &Session{c: conn, given: true}
		s.Close = func() error { s.dropRaw(); return nil }
		return s, nil
	}
	c, closer, err := DialLasting(netnsPath)
	if err != nil {
		return nil, err
	}
	s := &Session{netns: netnsPath, c: c}
	s.Close = func() error {
		s.dropRaw()
		go func() { // see dropRaw
			_ = c.CloseLasting()
			_ = closer()
		}()
		return nil
	}
	return s, nil
}

// raw returns the session's plain netlink socket where c speaks, dialling
// it on first use: google/nftables exposes neither the ruleset generation
// nor the batch's generation check.
func (s *Session) Raw() (*netlink.Conn, error) {
	if s.nc != nil {
		return s.nc, nil
	}
	if s.c.TestDial != nil {
		s.nc = nltest.Dial(s.c.TestDial)
		return s.nc, nil
	}
	nc, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: s.c.NetNS})
	if err != nil {
		return nil, fmt.Errorf("opening netlink: %w", err)
	}
	s.nc = nc
	return nc, nil
}

// dropRaw closes the raw socket. A batch may leave answers unread on it (a
// refused batch, a lost answer), so every commit drops it and whatever
// comes next dials a clean one.
//
// The socket is closed off the caller's path: releasing a netfilter socket
// waits until the kernel has reclaimed the rules the last batches deleted
// (nf_tables flushes its destroy work, an RCU grace period, on every
// NETLINK_URELEASE), about 10 ms after a batch of deletions. The batch was
// in force once acknowledged; nothing the caller does waits on the reclaim.
func (s *Session) dropRaw() {
	if nc := s.nc; nc != nil {
		s.nc = nil
		go nc.Close()
	}
}

// legacy reads the iptables-legacy tables in the marker's namespace.
func (s *Session) Legacy() ([]string, error) {
	switch {
	case !s.given:
		return LegacyTables(s.netns)
	case s.c.TestDial != nil:
		return nil, nil
	case s.c.NetNS != 0:
		return LegacyTables(fmt.Sprintf("/proc/self/fd/%d", s.c.NetNS))
	}
	return LegacyTables("")
}

// NftMsg is the netlink message type of nf_tables message t.
func NftMsg(t int) netlink.HeaderType { return netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | t) }

// generation asks the kernel for the ruleset generation (NFT_MSG_GETGEN).
func Generation(nc *netlink.Conn) (uint32, error) {
	msgs, err := nc.Execute(netlink.Message{
		Header: netlink.Header{Type: NftMsg(unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("reading the ruleset generation: %w", err)
	}
	for _, msg := range msgs {
		if msg.Header.Type != NftMsg(unix.NFT_MSG_NEWGEN) || len(msg.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(msg.Data[4:])
		if err != nil {
			return 0, fmt.Errorf("reading the ruleset generation: %w", err)
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
	}
	return 0, fmt.Errorf("reading the ruleset generation: no generation in the kernel's answer")
}

// snapshot reads the generation, then the ruleset: a change during the
// listing moves the generation past the one returned, so a write planned on
// this listing is refused by the kernel.
func (s *Session) Snapshot() (uint32, *firewall.Ruleset, error) { return s.SnapshotSome(nil) }

// snapshotSome is snapshot with the rules of the chains wants selects only
// (see listSome).
func (s *Session) SnapshotSome(wants func(t *firewall.Table, ch *firewall.Chain) bool) (uint32, *firewall.Ruleset, error) {
	nc, err := s.Raw()
	if err != nil {
		return 0, nil, err
	}
	gen, err := Generation(nc)
	if err != nil {
		return 0, nil, err
	}
	rs, err := listSome(s.c, wants, nil)
	if err != nil {
		return 0, nil, err
	}
	return gen, rs, nil
}

// Echoed is a rule the kernel echoed back after a committed batch.
type Echoed struct {
	Family, Table, Chain, Comment string
	Handle                        uint64
}

// commit sends what build queues as one batch that the kernel applies only
// at generation gen (NFNL_BATCH_GENID), all or nothing. google/nftables
// marshals the messages; they are captured from a connection that speaks to
// no kernel, and sent here with the generation added to the batch header.
func (s *Session) Commit(gen uint32, build func(c *nftables.Conn)) ([]Echoed, error) {
	var batch []netlink.Message
	ack := netlink.Message{Header: netlink.Header{Type: netlink.Error}, Data: make([]byte, 4)}
	capture, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if req == nil {
			return []netlink.Message{ack}, nil
		}
		batch = append(batch, req...)
		return nil, nil
	}))
	if err != nil {
		return nil, err
	}
	build(capture)
	if err := capture.Flush(); err != nil {
		return nil, fmt.Errorf("building the batch: %w", err)
	}
	if len(batch) < 3 {
		return nil, nil
	}
	// Only the last message asks for an acknowledgement. The kernel answers
	// a batch after committing or aborting it, in message order, and always
	// reports a message's error: so the last message's acknowledgement comes
	// after every error and echo, and means the batch is in force. Asking it
	// of every message cost one answer (two reads) per rule.
	for i := range batch {
		// Let the real socket number them.
		batch[i].Header.Length, batch[i].Header.Sequence, batch[i].Header.PID = 0, 0, 0
		batch[i].Header.Flags &^= netlink.Acknowledge
	}
	batch[len(batch)-2].Header.Flags |= netlink.Acknowledge
	begin := &batch[0]
	if begin.Header.Type != netlink.HeaderType(unix.NFNL_MSG_BATCH_BEGIN) {
		return nil, fmt.Errorf("building the batch: first message is %v, not a batch begin", begin.Header.Type)
	}
	genAttr, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFNL_BATCH_GENID, Data: binaryutil.BigEndian.PutUint32(gen)}})
	if err != nil {
		return nil, err
	}
	begin.Data = append(begin.Data[:4:4], genAttr...)

	nc, err := s.Raw()
	if err != nil {
		return nil, err
	}
	defer s.dropRaw()
	// A kernel that never answers must not hang the worker.
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	// Every new rule is echoed (that is how its handle comes back): room for
	// all answers, or the kernel drops some (ENOBUFS) and the batch's outcome
	// is unknown. The batch goes in one sendmsg: nfnetlink commits only a
	// batch whose begin and end arrive in the same datagram, and netlink
	// refuses a datagram larger than the socket's send buffer (wmem_default,
	// 208 KiB) with EMSGSIZE. A large ruleset's flip passes that, so the
	// send buffer grows to the batch, as nft's own batches do.
	size := batchSize(batch)
	growBuffers(nc, len(batch)*2048, size)
	if _, err := nc.SendMessages(batch); err != nil {
		if errors.Is(err, unix.EMSGSIZE) {
			// Refused before it was queued: the kernel never saw the batch.
			return nil, fmt.Errorf("the batch (%d messages, %d bytes) is larger than the netlink socket takes, nothing was changed: %w", len(batch), size, err)
		}
		return nil, fmt.Errorf("sending the batch: %w: %w", ErrOutcomeUnknown, err)
	}
	var echoes []Echoed
	for {
		msgs, err := nc.Receive()
		if err != nil {
			if errors.Is(err, unix.ERESTART) {
				// The generation check failed: the kernel dropped the
				// whole batch and answers nothing else.
				return nil, fmt.Errorf("%w (generation %d is no longer current); nothing was changed", ErrRulesetChanged, gen)
			}
			var oe *netlink.OpError
			if !errors.As(err, &oe) || oe.Op != "receive" || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOBUFS) || isTimeout(err) {
				return nil, fmt.Errorf("reading the kernel's answer to the batch (%w; list the marks to see): %w", ErrOutcomeUnknown, err)
			}
			// One message's error: the kernel aborts the whole batch on
			// any. Further answers (more errors, the last message's
			// acknowledgement) go unread; the socket is dropped.
			return nil, fmt.Errorf("the kernel refused the batch, nothing was changed: %w", err)
		}
		for _, msg := range msgs {
			switch msg.Header.Type {
			case netlink.Error:
				return echoes, nil // the last message's acknowledgement: errors come as errors
			case NftMsg(unix.NFT_MSG_NEWRULE):
				if e, ok := ParseEcho(msg); ok {
					echoes = append(echoes, e)
				}
			}
		}
	}
}

// growBuffers raises the socket's buffers to at least 1 MiB: the receive
// buffer to read bytes, the send buffer so that one datagram of send bytes
// fits (netlink wants 32 bytes beside it; the kernel doubles the value it
// is given). SO_RCVBUFFORCE and SO_SNDBUFFORCE pass rmem_max and wmem_max
// for a process with CAP_NET_ADMIN, which writing nftables needs anyway;
// SO_RCVBUF and SO_SNDBUF are the fallback.
func growBuffers(nc *netlink.Conn, read, send int) {
	rc, err := nc.SyscallConn()
	if err != nil {
		return // a test connection
	}
	for _, b := range []struct {
		n        int
		force    int
		fallback func(int) error
	}{{read, unix.SO_RCVBUFFORCE, nc.SetReadBuffer}, {send, unix.SO_SNDBUFFORCE, nc.SetWriteBuffer}} {
		n := max(b.n, 1<<20)
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, b.force, n)
		}); err != nil || serr != nil {
			_ = b.fallback(n)
		}
	}
}

// batchSize is the bytes batch takes on the wire: each message's header
// and its data padded to four bytes.
func batchSize(batch []netlink.Message) int {
	n := 0
	for _, m := range batch {
		n += unix.NLMSG_HDRLEN + (len(m.Data)+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1)
	}
	return n
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// ParseEcho reads a rule the kernel echoed back; false if msg is none.
func ParseEcho(msg netlink.Message) (Echoed, bool) {
	if len(msg.Data) < 4 {
		return Echoed{}, false
	}
	e := Echoed{Family: familyName(nftables.TableFamily(msg.Data[0]))}
	ad, err := netlink.NewAttributeDecoder(msg.Data[4:])
	if err != nil {
		return Echoed{}, false
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_RULE_TABLE:
			e.Table = ad.String()
		case unix.NFTA_RULE_CHAIN:
			e.Chain = ad.String()
		case unix.NFTA_RULE_HANDLE:
			e.Handle = ad.Uint64()
		case unix.NFTA_RULE_USERDATA:
			e.Comment, _ = userdata.GetString(ad.Bytes(), userdata.TypeComment)
		}
	}
	return e, ad.Err() == nil
}

// TableFamily is the nftables family of a model family name.
func TableFamily(f string) nftables.TableFamily {
	switch f {
	case firewall.FamilyIP:
		return nftables.TableFamilyIPv4
	case firewall.FamilyIP6:
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyINet
}
