package firewall

import (
	"testing"

	"github.com/google/nftables"
)

func TestForwardPlacementsAfterSourceDenies(t *testing.T) {
	rs, _ := loadFixture(t, "ufw-docker")
	// A source deny in ufw's forward chain, as "ufw route deny from" writes it.
	for ti := range rs.Tables {
		if ch := chainNamed(&rs.Tables[ti], "ufw-user-forward"); ch != nil && rs.Tables[ti].Family == FamilyIP {
			deny := Rule{Handle: 900, Conds: []Cond{saddr("203.0.113.0/24")}, Verdict: Verdict{Kind: VerdictDrop}}
			ch.Rules = append([]Rule{ch.Rules[0], deny}, ch.Rules[1:]...)
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
	for _, tb := range []*Table{
		{Family: FamilyIP, Name: "filter", Chains: []Chain{{Name: "FORWARD", Hook: HookForward}}},
		{Family: FamilyInet, Name: "host"},
	} {
		d := decoder{family: tb.Family, sets: map[string]*Set{}, setsKnown: true}
		r := d.rule(&nftables.Rule{Exprs: forwardMarkExprs(tb, 18082, "tcp"), UserData: markUserData(Mark{Node: "n1", Owner: "web", Port: 18082, Proto: "tcp"})})
		if len(r.Unknown) != 0 || r.Verdict.Kind != VerdictAccept || r.Comment != "adoption:n1:web:18082/tcp" {
			t.Fatalf("%s %s: %+v", tb.Family, tb.Name, r)
		}
		fam := FamilyIP
		pkt := packet{hook: HookForward, family: fam, proto: 6, port: 8082, origPort: 18082, dnat: true, src: atom{other: true}}
		for _, c := range r.Conds {
			if pkt.cond(&c) != triTrue {
				t.Errorf("%s: %s does not hold for a connection DNATed from 18082", tb.Name, renderCond(&c))
			}
		}
		pkt.origPort = 18083
		held := true
		for _, c := range r.Conds {
			held = held && pkt.cond(&c) == triTrue
		}
		if held {
			t.Errorf("%s: the mark for 18082 holds for 18083", tb.Name)
		}
	}
}
