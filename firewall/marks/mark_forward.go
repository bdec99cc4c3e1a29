// This file holds the marks on the forward path: a module's published port
// (a host port Docker DNATs to its container) opened where forwarded
// traffic is decided, keyed on what survives the container's recreation.

package marks

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/vocab"
)

// forwardMarkExprs is the accept for a published host port: a new
// connection that was DNATed and whose original destination port (the one
// the client used) is port. Neither the container's address nor its port
// appears, so the rule still matches after the container is recreated with
// a new address. In an iptables-nft table it is written as iptables writes
// "-p tcp -m conntrack --ctstate DNAT --ctorigdstport N -j ACCEPT" (so
// iptables-save and ufw read it); in a native table as nft writes "meta
// l4proto tcp ct status dnat ct original proto-dst N accept".
func forwardMarkExprs(t *firewall.Table, port uint16, proto string) []expr.Any {
	p := L4num(proto)
	ex := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
	if firewall.IsIptablesTable(t) {
		info := &xt.ConntrackMtinfo3{}
		info.MatchFlags = uint16(xt.ConntrackState | xt.ConntrackOrigDstPort)
		info.StateMask = nft.XtCtStateDNAT
		info.OrigDstPort, info.OrigDstPortHigh = port, port // rev 3: a host-order range
		ex = append(ex, &expr.Match{Name: "conntrack", Rev: 3, Info: info})
	} else {
		ex = append(ex, CtBits(expr.CtKeySTATUS, firewall.IpsDstNAT, expr.VerdictAccept)...)
		ex = ex[:len(ex)-1]
		ex = append(ex,
			&expr.Ct{Key: expr.CtKeyPROTODST, Register: 1, Direction: 0},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)})
	}
	return append(ex, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept})
}

// forwardPlacements says where a forward mark for (proto, port) takes
// effect, per iptables-nft filter table (ip and ip6) and native table:
//
//   - ufw's ufw-user-forward (ufw6-user-forward), where its routed rules live
//     and where the ufw-docker arrangement sends DOCKER-USER;
//   - else Docker's DOCKER-USER, the hook Docker leaves to the operator;
//   - else the FORWARD base chain, and in a native table each filter base
//     chain at the forward hook that could drop the connection.
//
// In the chain chosen the mark goes where placeIn puts it, by the same
// rule as an input mark: after the last of the found firewall's possible
// source denies ("ufw route deny from ...", a blocklist set, a rule the
// decoder cannot decide), so a denied source stays denied, and, in a base
// chain, before the first rule after them that could drop the connection.
// A source deny in DOCKER-USER after its jump to ufw's chain is noted
// (laterDenies). A chain that could not be listed is an error: where the
// mark would go cannot be decided.
func forwardPlacements(rs *firewall.Ruleset, proto string, port uint16) ([]placement, error) {
	m := forwardMatch(proto, port)
	var out []placement
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		for _, ch := range markChains(t, firewall.HookForward) {
			if ch.Unknown != "" {
				return nil, fmt.Errorf("chain %s %s %s could not be listed (%s): cannot tell where a forward mark would take effect", t.Family, t.Name, ch.Name, ch.Unknown)
			}
			p, need := placeIn(t, ch, m)
			if !need {
				continue // this base chain never drops the connection
			}
			p.notes = append(p.notes, laterDenies(t, ch, m)...)
			out = append(out, p)
		}
	}
	return out, nil
}

// forwardListed are the chains forwardPlacements reads the rules of (with
// the chains they jump to): markChains at the forward hook and, when the mark goes to ufw's
// chain, DOCKER-USER, whose rules after its jump there the mark skips.
func forwardListed(t *firewall.Table, ch *firewall.Chain) bool {
	chains := markChains(t, firewall.HookForward)
	if slices.Contains(chains, ch) {
		return true
	}
	return ch.Name == "DOCKER-USER" && len(chains) == 1 && firewall.IsUfwChain(chains[0].Name)
}

// OpenForward makes every published host port in ports reachable for owner
// through the found firewall's forward path: one marked accept per port in
// every chain where it takes effect (forwardPlacements), IPv4 and IPv6.
// The mark is the same adoption:<node>:<owner>:<port>/<proto> comment as an
// input mark, so Close and Release remove both. Marks already there are
// reported as present. One batch, applied only at the listed generation;
// nothing is changed on any error.
func (m *Marker) OpenForward(node, owner string, ports []vocab.Port) (added, present []MarkedRule, err error) {
	return m.openOn(forwardPath, node, owner, ports)
}

var forwardPath = markPath{
	what:       "published ports",
	chains:     forwardListed,
	placements: forwardPlacements,
	exprs:      func(in insertion) []expr.Any { return forwardMarkExprs(in.at.table, in.mark.Port, in.mark.Proto) },
}

// checkMarks validates names and ports and returns one mark per distinct
// port, in order.
func checkMarks(node, owner string, ports []vocab.Port) ([]Mark, error) {
	errs := []error{ValidNames(node, owner)}
	if owner == "" {
		errs = append(errs, fmt.Errorf("owner name is empty"))
	}
	var marks []Mark
	seen := map[Mark]bool{}
	for _, p := range ports {
		mk := Mark{Node: node, Owner: owner, Port: p.Num, Proto: p.Proto}
		perr := p.Validate()
		switch {
		case perr != nil:
			errs = append(errs, fmt.Errorf("port %s: %w", p, perr))
		case errs[0] == nil && len(mk.Comment()) > MaxCommentLen:
			errs = append(errs, fmt.Errorf("port %s: comment %q is longer than the %d bytes a rule comment holds", p, mk.Comment(), MaxCommentLen))
		case !seen[mk]:
			seen[mk] = true
			marks = append(marks, mk)
		}
	}
	return marks, errors.Join(errs...)
}
