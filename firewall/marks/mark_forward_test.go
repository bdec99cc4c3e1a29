package marks

import (
	"testing"

	"github.com/google/nftables"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/nft"
	"adoption/internal/fwtest"
)

func TestForwardPlacementsAfterSourceDenies(t *testing.T) {
	rs, _ := fwtest.LoadFixture(t, "ufw-docker")
	// A source deny in ufw's forward chain, as "ufw route deny from" writes it.
	for ti := range rs.Tables {
		if ch := ChainNamed(&rs.Tables[ti], "ufw-user-forward"); ch != nil && rs.Tables[ti].Family == firewall.FamilyIP {
			deny := firewall.Rule{Handle: 900, Conds: []firewall.Cond{fwtest.Saddr("203.0.113.0/24")}, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}}
			ch.Rules = append([]firewall.Rule{ch.Rules[0], deny}, ch.Rules[1:]...)
		}
	}
	at, err := forwardPlacements(rs, "tcp", 18082)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]placement{}
	for _, p := range at {
		got[p.table.Family+" "+p.chain.Name] = p
	}
	if len(at) != 2 {
		t.Errorf("placements %v; want ufw-user-forward and ufw6-user-forward", got)
	}
	p, ok := got["ip ufw-user-forward"]
	if !ok {
		t.Fatalf("no placement in ip ufw-user-forward: %v", got)
	}
	ch := p.chain
	if p.before != ch.Rules[2].Handle {
		t.Errorf("mark goes before handle %d; want right after the source deny (before handle %d)", p.before, ch.Rules[2].Handle)
	}
	if _, ok := got["ip6 ufw6-user-forward"]; !ok {
		t.Errorf("no placement in ip6 ufw6-user-forward: %v", got)
	}
}

func TestForwardMarkDecodesAsKeyedOnHostPort(t *testing.T) {
	for _, tb := range []*firewall.Table{
		{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{{Name: "FORWARD", Hook: firewall.HookForward}}},
		{Family: firewall.FamilyInet, Name: "host"},
	} {
		d := nft.Decoder{Family: tb.Family, Sets: map[string]*firewall.Set{}, SetsKnown: true}
		r := d.Rule(&nftables.Rule{Exprs: forwardMarkExprs(tb, 18082, "tcp"), UserData: markUserData(Mark{Node: "n1", Owner: "web", Port: 18082, Proto: "tcp"})})
		if len(r.Unknown) != 0 || r.Verdict.Kind != firewall.VerdictAccept || r.Comment != "adoption:n1:web:18082/tcp" {
			t.Fatalf("%s %s: %+v", tb.Family, tb.Name, r)
		}
		fam := firewall.FamilyIP
		pkt := eval.Packet{Hook: firewall.HookForward, Family: fam, Proto: 6, Port: 8082, OrigPort: 18082, Dnat: true, Src: eval.Atom{Other: true}}
		for _, c := range r.Conds {
			if pkt.Cond(&c) != eval.TriTrue {
				t.Errorf("%s: %s does not hold for a connection DNATed from 18082", tb.Name, firewall.RenderCond(&c))
			}
		}
		pkt.OrigPort = 18083
		held := true
		for _, c := range r.Conds {
			held = held && pkt.Cond(&c) == eval.TriTrue
		}
		if held {
			t.Errorf("%s: the mark for 18082 holds for 18083", tb.Name)
		}
	}
}
