package flip

import (
	"net/netip"
	"testing"

	"adoption/firewall"
	"adoption/firewall/marks"
	"adoption/internal/fwtest"
)

func TestFoundFingerprintIgnoresMarksAndHandles(t *testing.T) {
	base := func() *firewall.Ruleset {
		return &firewall.Ruleset{Tables: []firewall.Table{{Family: "ip", Name: "filter", Chains: []firewall.Chain{{
			Name: "ufw-user-input", Rules: []firewall.Rule{
				{Handle: 5, Conds: []firewall.Cond{{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 22, To: 22}}}}, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}},
			}}}}}}
	}
	a := FoundFingerprint(base())

	marked := base()
	c := &marked.Tables[0].Chains[0]
	c.Rules = append([]firewall.Rule{{Handle: 9, Comment: "adoption:n1:foundation:5001/tcp", Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}}, c.Rules...)
	c.Rules[1].Handle = 77 // a reload gives new handles
	marked.Tables = append(marked.Tables, firewall.Table{Family: "inet", Name: "adoption"})
	if FoundFingerprint(marked) != a {
		t.Fatal("a mark, new handles or the mesh's table changed the found fingerprint")
	}

	edited := base()
	edited.Tables[0].Chains[0].Rules[0].Conds[0].Ports[0] = firewall.PortRange{From: 2222, To: 2222}
	if FoundFingerprint(edited) == a {
		t.Fatal("a rule changed by hand did not change the found fingerprint")
	}
	added := base()
	added.Tables[0].Chains[0].Rules = append(added.Tables[0].Chains[0].Rules, firewall.Rule{Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}})
	if FoundFingerprint(added) == a {
		t.Fatal("a rule added by hand did not change the found fingerprint")
	}
}

// Docker recreating a container gives it a new address: its DNAT in the
// nat table's DOCKER chain and its hairpin masquerade in POSTROUTING
// ("-s C/32 -d C/32 -p tcp --dport P -j MASQUERADE", written per published
// port, with no interface to tell it by) are rewritten with it, and
// appended anew. None of that is drift of the found firewall; a change to
// one of ufw's rules still is, and so is one to a masquerade of the
// predecessor's own.
func TestFoundFingerprintDockerRecreatesAContainer(t *testing.T) {
	rs, _ := fwtest.LoadFixture(t, "ufw-docker")
	nat := map[string]*firewall.Table{}
	for ti := range rs.Tables {
		if tb := &rs.Tables[ti]; tb.Name == "nat" {
			nat[tb.Family] = tb
		}
	}
	hairpins := 0
	for fam, tb := range nat {
		post := marks.ChainNamed(tb, "POSTROUTING")
		if post == nil || len(post.Rules) == 0 {
			t.Fatalf("%s nat: no POSTROUTING rules in the fixture", fam)
		}
		for ri := range post.Rules {
			r := &post.Rules[ri]
			if o := firewall.RuleOwner(nil, tb, post, r); o != (firewall.Ownership{Owner: firewall.OwnedByForeign, Tool: "docker"}) {
				t.Errorf("%s nat POSTROUTING %s: %+v, want Docker's", fam, firewall.RenderRule(r), o)
			}
			for _, c := range r.Conds {
				if c.Kind == firewall.CondDaddr {
					hairpins++
				}
			}
		}
	}
	if hairpins != 8 {
		t.Fatalf("%d hairpin masquerades in the fixture, want 8 (6 published ports over IPv4, 2 over IPv6)", hairpins)
	}
	before := FoundFingerprint(rs)

	moved := loadRecreated(t, map[netip.Addr]netip.Addr{
		netip.MustParseAddr("172.17.0.2"): netip.MustParseAddr("172.17.0.3"),
		netip.MustParseAddr("fd00:17::2"): netip.MustParseAddr("fd00:17::3"),
	})
	if FoundFingerprint(moved) != before {
		t.Error("a container recreated with a new address changed the found fingerprint")
	}

	edited, _ := fwtest.LoadFixture(t, "ufw-docker")
	for ti := range edited.Tables {
		if ch := marks.ChainNamed(&edited.Tables[ti], "ufw-user-forward"); ch != nil && edited.Tables[ti].Family == firewall.FamilyIP {
			ch.Rules[0].Conds = append(ch.Rules[0].Conds, firewall.Cond{Kind: firewall.CondSaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}})
		}
	}
	if FoundFingerprint(edited) == before {
		t.Error("a ufw routed rule changed by hand did not change the found fingerprint")
	}

	// The predecessor's own masquerades: a VPN's, and one that names the
	// same address twice outside any network Docker masquerades.
	for _, r := range []firewall.Rule{
		{Conds: []firewall.Cond{{Kind: firewall.CondSaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.8.0.0/24")}}, {Kind: firewall.CondOifname, Names: []string{"eth0"}}}, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}},
		{Conds: []firewall.Cond{{Kind: firewall.CondSaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.9.0.5/32")}}, {Kind: firewall.CondDaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.9.0.5/32")}}}, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}},
	} {
		own, _ := fwtest.LoadFixture(t, "ufw-docker")
		for ti := range own.Tables {
			if tb := &own.Tables[ti]; tb.Name == "nat" && tb.Family == firewall.FamilyIP {
				post := marks.ChainNamed(tb, "POSTROUTING")
				post.Rules = append(post.Rules, r)
				if o := firewall.RuleOwner(nil, tb, post, &post.Rules[len(post.Rules)-1]); o.Owner != firewall.OwnedByPredecessor {
					t.Errorf("%s: %+v, want the predecessor's", firewall.RenderRule(&r), o)
				}
			}
		}
		if FoundFingerprint(own) == before {
			t.Errorf("the predecessor's %s did not change the found fingerprint", firewall.RenderRule(&r))
		}
	}
}

// loadRecreated is the ufw-docker fixture after Docker recreated its
// container with the addresses moved: every rule naming an old address
// (its DNATs, the DOCKER chain's accepts, the hairpin masquerades) is
// rewritten with the new one and appended at its chain's end with a new
// handle, as Docker writes a new container's rules.
func loadRecreated(t *testing.T, moved map[netip.Addr]netip.Addr) *firewall.Ruleset {
	t.Helper()
	rs, _ := fwtest.LoadFixture(t, "ufw-docker")
	handle := uint64(1000)
	for ti := range rs.Tables {
		for ci := range rs.Tables[ti].Chains {
			ch := &rs.Tables[ti].Chains[ci]
			var kept, recreated []firewall.Rule
			for _, r := range ch.Rules {
				changed := false
				if n := r.Verdict.NAT; n != nil {
					if a, ok := moved[n.Addr]; ok {
						nat := *n
						nat.Addr, r.Verdict.NAT, changed = a, &nat, true
					}
				}
				conds := make([]firewall.Cond, len(r.Conds))
				for k, c := range r.Conds {
					ps := make([]netip.Prefix, len(c.Prefixes))
					for j, p := range c.Prefixes {
						ps[j] = p
						if a, ok := moved[p.Addr()]; ok && p.IsSingleIP() {
							ps[j], changed = netip.PrefixFrom(a, p.Bits()), true
						}
					}
					c.Prefixes = ps
					conds[k] = c
				}
				r.Conds = conds
				if !changed {
					kept = append(kept, r)
					continue
				}
				handle++
				r.Handle = handle
				recreated = append(recreated, r)
			}
			ch.Rules = append(kept, recreated...)
		}
	}
	return rs
}
