// This file holds the marks: rules the mesh adds to the found firewall,
// named adoption:<node>:<owner>:<port>/<proto>, where they take effect, and
// their removal by handle.

package marks

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/nft"
	"adoption/vocab"
)

// Mark is firewall.Mark.
type Mark = firewall.Mark

// MaxCommentLen is firewall.MaxCommentLen.
const MaxCommentLen = firewall.MaxCommentLen

// ParseMark is firewall.ParseMark.
func ParseMark(comment string) (Mark, bool) { return firewall.ParseMark(comment) }

// MarkedRule is firewall.MarkedRule.
type MarkedRule = firewall.MarkedRule

// Marker opens and closes ports through the found firewall of one network
// namespace, as rules marked as the mesh's own. Every operation lists the
// ruleset, plans on it and writes in one netlink batch that the kernel applies
// only if the ruleset generation is still the one listed: a concurrent change
// makes the batch fail as a whole.
type Marker struct {
	netns string
	conn  *nftables.Conn
}

// NewMarker speaks the firewall of the network namespace at netnsPath ("" for
// the caller's own); it dials anew for each operation.
func NewMarker(netnsPath string) *Marker { return &Marker{netns: netnsPath} }

// NewMarkerWithConn speaks through c: tests pass a connection made with
// nftables.WithTestDial, or one made with nftables.WithNetNSFd.
func NewMarkerWithConn(c *nftables.Conn) *Marker { return &Marker{conn: c} }

// Session opens one operation's connections to the marker's namespace.
func (m *Marker) Session() (*nft.Session, error) { return nft.OpenSession(m.netns, m.conn) }

// markExprs is the rule a mark opens a port with, in the form nft itself
// writes "meta l4proto tcp tcp dport N counter accept comment ...", which
// iptables-nft reads back as "-p tcp -m tcp --dport N -m comment --comment
// ... -j ACCEPT": native payload and cmp (no xtables match, so nothing
// depends on the xt modules), the comment in the rule's user data.
func MarkExprs(port uint16, proto string) []expr.Any {
	p := byte(unix.IPPROTO_TCP)
	if proto == "udp" {
		p = unix.IPPROTO_UDP
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
}

func markUserData(m Mark) []byte {
	return userdata.AppendString(nil, userdata.TypeComment, m.Comment())
}

// placement is where one mark goes: at the head of the chain, before the
// rule with handle before, or appended. from is the index of the first rule
// after the chain's last possible source deny (0: none); notes say what
// about the place could not be decided (placeIn).
type placement struct {
	table  *firewall.Table
	chain  *firewall.Chain
	before uint64
	append bool
	from   int
	notes  []string
}

// placements says where a mark for (proto, port) takes effect: in ufw's
// own per-port chain, else in every base chain at the input hook that
// could drop a new connection to the port; in each, where placeIn puts it
// (after the found firewall's source denies). It reads the rules of
// markChains at the input hook and of the chains they jump to only. A chain that could not
// be listed is an error: where the mark would go cannot be decided.
func placements(rs *firewall.Ruleset, proto string, port uint16) ([]placement, error) {
	m := inputMatch(proto, port)
	var out []placement
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		for _, ch := range markChains(t, firewall.HookInput) {
			if ch.Unknown != "" {
				return nil, fmt.Errorf("chain %s %s %s could not be listed (%s): cannot tell where a mark would take effect", t.Family, t.Name, ch.Name, ch.Unknown)
			}
			p, need := placeIn(t, ch, m)
			if !need {
				continue // this chain never drops the port
			}
			p.notes = append(p.notes, laterDenies(t, ch, m)...)
			out = append(out, p)
		}
	}
	return out, nil
}

// ValidNames checks a node and an owner name before they reach a comment.
func ValidNames(node, owner string) error {
	var errs []error
	if !vocab.ValidName(node) {
		errs = append(errs, fmt.Errorf("node name %q is not valid (%s)", node, vocab.NameRule))
	}
	if owner != "" && !vocab.ValidName(owner) {
		errs = append(errs, fmt.Errorf("owner name %q is not valid (%s)", owner, vocab.NameRule))
	}
	return errors.Join(errs...)
}

// Open makes every port reachable for owner through the found firewall: one
// marked accept rule per port in every chain where it takes effect (see
// placements). Marks already there are reported as present and not added
// again. All additions go to the kernel in one batch, applied only if the
// ruleset is still the one listed. Nothing is changed on any error.
func (m *Marker) Open(node, owner string, ports []vocab.Port) (added, present []MarkedRule, err error) {
	return m.openOn(inputPath, node, owner, ports)
}

// markPath is where a kind of mark goes: the input path (a port the node
// serves) or the forward path (a host port Docker publishes). Open and
// OpenForward differ only in these.
type markPath struct {
	what string // in messages: "ports", "published ports"
	// chains says which chains' rules placements needs listed.
	chains     func(t *firewall.Table, ch *firewall.Chain) bool
	placements func(rs *firewall.Ruleset, proto string, port uint16) ([]placement, error)
	exprs      func(in insertion) []expr.Any
	// hook, when set, is where the found firewall's own restriction of a
	// port is read (eval.SourcesAt): a port it opens only to some sources
	// (an allow from one network, a deny list, a rate limit) gets no mark,
	// so the mark never opens it to every source.
	hook string
}

var inputPath = markPath{
	what: "ports",
	// The base chains at prerouting and input too (and what they jump to),
	// where the found restriction of a port is read.
	chains: func(t *firewall.Table, ch *firewall.Chain) bool {
		return ch.Hook == firewall.HookInput || ch.Hook == firewall.HookPrerouting || slices.Contains(markChains(t, firewall.HookInput), ch)
	},
	placements: placements,
	exprs:      func(in insertion) []expr.Any { return MarkExprs(in.mark.Port, in.mark.Proto) },
	hook:       firewall.HookInput,
}

// restricted reports whether the found firewall rs opens (proto, port) at
// hook to some sources but not surely to every one, in either family: what
// is on the machine stays, and a mark would widen it.
func restricted(r *eval.Reacher, hook, proto string, port uint16) bool {
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		if s := r.At(hook, fam, proto, port); s.Open() && !s.Plain() {
			return true
		}
	}
	return false
}

// openOn opens marks on one path: one listing of the chains that path
// needs, one batch at that generation; nothing changed on any error.
func (m *Marker) openOn(path markPath, node, owner string, ports []vocab.Port) (added, present []MarkedRule, err error) {
	marks, err := checkMarks(node, owner, ports)
	if err != nil {
		return nil, nil, fmt.Errorf("not opening %s for owner %q on node %q, nothing was changed: %w", path.what, owner, node, err)
	}
	if len(marks) == 0 {
		return nil, nil, nil
	}
	s, err := m.Session()
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	// Kind reads tables and chains; placements the rules of path.chains.
	gen, rs, err := s.SnapshotSome(path.chains)
	if err != nil {
		return nil, nil, err
	}
	legacy, err := s.Legacy()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the iptables-legacy tables: %w", err)
	}
	if _, err := nft.Kind(rs, legacy); err != nil {
		return nil, nil, fmt.Errorf("not opening %s for %s on %s: %w", path.what, owner, node, err)
	}
	var reach *eval.Reacher
	if path.hook != "" {
		reach = eval.NewReacher(rs, firewall.Node{})
	}
	todo, present, err := plan(marks, func(mk Mark) ([]placement, error) {
		if reach != nil && restricted(reach, path.hook, mk.Proto, mk.Port) {
			return nil, nil // kept as the found firewall restricts it
		}
		at, err := path.placements(rs, mk.Proto, mk.Port)
		if err != nil {
			return nil, fmt.Errorf("not opening %d/%s for %s on %s, nothing was changed: %w", mk.Port, mk.Proto, owner, node, err)
		}
		return at, nil
	})
	if err != nil || len(todo) == 0 {
		return nil, present, err
	}
	added, err = addMarks(s, gen, todo, path.exprs)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s for %s on %s: %w", path.what, owner, node, err)
	}
	return added, present, nil
}

// insertion is one mark to add where it takes effect.
type insertion struct {
	mark    Mark
	comment string
	at      placement
}

// plan says where each mark goes (where) and which of those places already
// hold it: those are present, the rest are to add. A chain's comments are
// read once, not once per mark.
func plan(marks []Mark, where func(Mark) ([]placement, error)) (todo []insertion, present []MarkedRule, err error) {
	held := map[*firewall.Chain]map[string]uint64{} // chain -> comment -> first handle
	for _, mk := range marks {
		at, err := where(mk)
		if err != nil {
			return nil, nil, err
		}
		comment := mk.Comment()
		for _, p := range at {
			hs, ok := held[p.chain]
			if !ok {
				hs = map[string]uint64{}
				for _, r := range p.chain.Rules {
					if _, dup := hs[r.Comment]; !dup && r.Comment != "" {
						hs[r.Comment] = r.Handle
					}
				}
				held[p.chain] = hs
			}
			if h, ok := hs[comment]; ok {
				present = append(present, MarkedRule{Mark: mk, Family: p.table.Family, Table: p.table.Name, Chain: p.chain.Name, Handle: h,
					Placement: placementNote(p, h)})
				continue
			}
			todo = append(todo, insertion{mark: mk, comment: comment, at: p})
		}
	}
	return todo, present, nil
}

// addMarks writes todo as one batch at generation gen, each rule made of
// exprs(in) and its mark's comment, and returns the rules added with the
// handles the kernel echoed.
func addMarks(s *nft.Session, gen uint32, todo []insertion, exprs func(insertion) []expr.Any) ([]MarkedRule, error) {
	rule := func(in insertion) *nftables.Rule {
		return &nftables.Rule{
			Table:    &nftables.Table{Family: nft.TableFamily(in.at.table.Family), Name: in.at.table.Name},
			Chain:    &nftables.Chain{Name: in.at.chain.Name},
			Position: in.at.before,
			Exprs:    exprs(in),
			UserData: userdata.AppendString(nil, userdata.TypeComment, in.comment),
		}
	}
	echoes, err := s.Commit(gen, func(c *nftables.Conn) {
		// Each insertion at a chain's head goes before the previous one:
		// queue those in reverse, so the chain lists the ports in order.
		for i := len(todo) - 1; i >= 0; i-- {
			if in := todo[i]; !in.at.append && in.at.before == 0 {
				c.InsertRule(rule(in))
			}
		}
		for _, in := range todo {
			switch {
			case in.at.append:
				c.AddRule(rule(in))
			case in.at.before != 0:
				c.InsertRule(rule(in))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	type where struct{ family, table, chain, comment string }
	handles := make(map[where]uint64, len(echoes))
	for _, e := range echoes {
		handles[where{e.Family, e.Table, e.Chain, e.Comment}] = e.Handle
	}
	added := make([]MarkedRule, 0, len(todo))
	for _, in := range todo {
		r := MarkedRule{Mark: in.mark, Family: in.at.table.Family, Table: in.at.table.Name, Chain: in.at.chain.Name, Placement: placementNote(in.at, 0)}
		r.Handle = handles[where{r.Family, r.Table, r.Chain, in.comment}]
		added = append(added, r)
	}
	return added, nil
}

// Close removes owner's marked rules of node, and only those.
func (m *Marker) Close(node, owner string) ([]MarkedRule, error) {
	if err := ValidNames(node, owner); err != nil {
		return nil, fmt.Errorf("not closing, nothing was changed: %w", err)
	}
	if owner == "" {
		return nil, fmt.Errorf("not closing, nothing was changed: owner name is empty")
	}
	return m.remove(func(mk Mark) bool { return mk.Node == node && mk.Owner == owner })
}

// Release removes every marked rule of node: the found firewall is left as
// it was before the mesh opened anything.
func (m *Marker) Release(node string) ([]MarkedRule, error) {
	if err := ValidNames(node, ""); err != nil {
		return nil, fmt.Errorf("not releasing, nothing was changed: %w", err)
	}
	return m.remove(func(mk Mark) bool { return mk.Node == node })
}

// List returns the marked rules of node, in listing order.
func (m *Marker) List(node string) ([]MarkedRule, error) {
	if err := ValidNames(node, ""); err != nil {
		return nil, err
	}
	s, err := m.Session()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	nc, err := s.Raw()
	if err != nil {
		return nil, err
	}
	return findMarks(nc, func(mk Mark) bool { return mk.Node == node })
}

// remove deletes the selected marked rules by handle in one batch. A rule
// that vanished between listing and deleting (removed by hand, or by a
// reload of the found firewall) makes the kernel refuse the batch, and a
// change during the listing makes it incomplete: the marks are listed again
// and the removal retried once.
func (m *Marker) remove(keep func(Mark) bool) ([]MarkedRule, error) {
	s, err := m.Session()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		gen, rules, err := sessionMarks(s, keep)
		if errors.Is(err, nft.ErrRulesetChanged) {
			last = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("nothing was removed: %w", err)
		}
		if len(rules) == 0 {
			return nil, nil
		}
		_, err = s.Commit(gen, func(c *nftables.Conn) {
			for _, r := range rules {
				// DelRule fails only on handle 0, which a listed rule never has.
				_ = c.DelRule(&nftables.Rule{
					Table:  &nftables.Table{Family: nft.TableFamily(r.Family), Name: r.Table},
					Chain:  &nftables.Chain{Name: r.Chain},
					Handle: r.Handle,
				})
			}
		})
		if err == nil {
			return rules, nil
		}
		if !errors.Is(err, nft.ErrRulesetChanged) && !errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("removing marked rules: %w", err)
		}
		last = err
	}
	return nil, fmt.Errorf("removing marked rules: the ruleset kept changing, tried twice: %w", last)
}

// L4num is the IP protocol number of "tcp" or "udp" (tcp for anything else).
func L4num(proto string) byte {
	if proto == "udp" {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

// ctBits is "ct <key> & bits != 0 <verdict>" as nft writes it.
func CtBits(key expr.CtKey, bits uint32, v expr.VerdictKind) []expr.Any {
	return []expr.Any{
		&expr.Ct{Key: key, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: v},
	}
}

// iifname is `iifname "name" verdict`; a trailing '*' is a prefix match.
func Iifname(name string, v expr.VerdictKind) []expr.Any {
	data := []byte(strings.TrimSuffix(name, "*"))
	if !strings.HasSuffix(name, "*") {
		data = append(data, make([]byte, unix.IFNAMSIZ-len(data))...)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data},
		&expr.Verdict{Kind: v},
	}
}
