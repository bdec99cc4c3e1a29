// This file holds what a rule does to a packet besides deciding its fate
// (the writes: to a header, a mark, conntrack, an address), for every
// family, and the reading of rules in the families the evaluator does not
// run (bridge, arp, netdev): their verdicts and writes, not their
// conditions.

package nft

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// writes names what expression e writes into a packet or its metadata, or
// "" when it writes nothing (a trace flag is not a write: it changes no
// later decision).
func writes(e expr.Any) string {
	switch e := e.(type) {
	case *expr.Meta:
		if !e.SourceRegister || e.Key == expr.MetaKeyNFTRACE {
			return ""
		}
		switch e.Key {
		case expr.MetaKeyMARK:
			return "meta mark set"
		case expr.MetaKeyPRIORITY:
			return "meta priority set"
		case expr.MetaKeyPKTTYPE:
			return "meta pkttype set"
		case expr.MetaKeySECMARK:
			return "meta secmark set"
		}
		return fmt.Sprintf("meta key %d set", e.Key)
	case *expr.Payload:
		if e.OperationType == expr.PayloadWrite {
			return fmt.Sprintf("payload write (base %d, offset %d, %d bytes)", e.Base, e.Offset, e.Len)
		}
	case *expr.Ct:
		if e.SourceRegister {
			if e.Key == expr.CtKeyMARK {
				return "ct mark set"
			}
			return fmt.Sprintf("ct key %d set", e.Key)
		}
	case *expr.Exthdr:
		if e.SourceRegister != 0 {
			return "extension header write"
		}
	case *expr.Target:
		if xtTargetWrites(e.Name) {
			return "xt target " + e.Name
		}
	}
	return ""
}

// xtTargetWrites reports whether xt target name changes the packet, its
// marks, its conntrack entry or its route, as opposed to deciding its fate
// (ACCEPT, DROP, REJECT, RETURN, the NAT targets: verdicts) or only
// observing it (the logging targets, and SET, which changes an ipset).
func xtTargetWrites(name string) bool {
	switch name {
	case "ACCEPT", "DROP", "REJECT", "RETURN", "CONTINUE", "DNAT", "SNAT", "REDIRECT", "MASQUERADE", "NETMAP",
		"LOG", "NFLOG", "ULOG", "TRACE", "AUDIT", "IDLETIMER", "LED", "SET", "nflog", "log", "ulog":
		return false
	}
	return true
}

// otherFamilyRule reads rule nr of a family the evaluator does not run: not
// its conditions (they decide only whether it matches), but what it does to
// a packet it matches, its verdict and its writes. An expression it does not
// know counts as a write, so a rule it cannot read is never taken for one
// that only passes packets on. (google/nftables drops the expressions it
// cannot decode at all, e.g. fwd and dup: those stay unseen.)
func otherFamilyRule(nr *nftables.Rule, family string) firewall.Rule {
	r := firewall.Rule{Handle: nr.Handle, Verdict: firewall.Verdict{Kind: firewall.VerdictContinue},
		Unknown: []string{"family " + family + " is not decoded: only its verdict and writes are read"}}
	for _, e := range nr.Exprs {
		if w := writes(e); w != "" {
			r.Writes = append(r.Writes, w)
			continue
		}
		switch e := e.(type) {
		case *expr.Verdict:
			r.Verdict = verdictOf(e)
		case *expr.Reject:
			r.Verdict = firewall.Verdict{Kind: firewall.VerdictReject}
		case *expr.Queue:
			r.Verdict = firewall.Verdict{Kind: firewall.VerdictUnknown, Target: "queue"}
		case *expr.SynProxy:
			r.Verdict = firewall.Verdict{Kind: firewall.VerdictUnknown, Target: "synproxy"}
		case *expr.Lookup:
			if e.IsDestRegSet && e.DestRegister == unix.NFT_REG_VERDICT {
				r.Verdict = firewall.Verdict{Kind: firewall.VerdictUnknown, Target: "verdict map " + e.SetName}
			}
		case *expr.Target:
			switch e.Name {
			case "ACCEPT":
				r.Verdict = firewall.Verdict{Kind: firewall.VerdictAccept}
			case "DROP":
				r.Verdict = firewall.Verdict{Kind: firewall.VerdictDrop}
			case "REJECT":
				r.Verdict = firewall.Verdict{Kind: firewall.VerdictReject}
			case "RETURN":
				r.Verdict = firewall.Verdict{Kind: firewall.VerdictReturn}
			}
		case *expr.NAT:
			r.Writes = append(r.Writes, "nat")
		case *expr.Redir:
			r.Writes = append(r.Writes, "redirect")
		case *expr.Masq:
			r.Writes = append(r.Writes, "masquerade")
		case *expr.Objref:
			if e.Type == 10 { // NFT_OBJECT_SYNPROXY
				r.Verdict = firewall.Verdict{Kind: firewall.VerdictUnknown, Target: "synproxy"}
			}
		case *expr.Meta, *expr.Payload, *expr.Ct, *expr.Exthdr, *expr.Cmp, *expr.Bitwise, *expr.Range,
			*expr.Immediate, *expr.Counter, *expr.Log, *expr.Limit, *expr.Quota, *expr.Connlimit,
			*expr.Match, *expr.Fib, *expr.Hash, *expr.Numgen, *expr.Dynset:
			// loads, comparisons, counters: they decide whether the rule
			// matches, not what it does
		default:
			r.Writes = append(r.Writes, fmt.Sprintf("expression %T, not read", e))
		}
	}
	return r
}
