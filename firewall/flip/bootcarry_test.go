package flip

import (
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// On the fixtures listed from real nodes, the tables iptables-nft shares
// hold Docker's rules only (recreated by dockerd at boot): nothing is
// named. A rule of ufw's *nat section (a DNAT in nat PREROUTING) and one
// of its *raw section are named, with table, chain and handle, unless the
// found boot file declares their table; a counter is not.
func TestUnbootedNamesPredecessorRulesOfSharedTables(t *testing.T) {
	for _, name := range []string{"docker28", "ufw-docker", "reference-node", "control-node"} {
		rs, node := fwtest.LoadFixture(t, name)
		plan, err := PlannedRevert(rs, &node, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if tables, rules, err := Unbooted(rs, "", plan, &node); err != nil || len(rules) != 0 {
			t.Errorf("%s: Unbooted named %v %q %v; want no rule (Docker's are recreated at boot)", name, tables, rules, err)
		}
	}
	rs, node := fwtest.LoadFixture(t, "ufw-docker")
	dnat := firewall.Rule{Handle: 901, Conds: []firewall.Cond{fwtest.Tcp(), fwtest.Dport(8443)},
		Verdict: firewall.Verdict{Kind: firewall.VerdictDNAT, NAT: &firewall.NATTarget{Addr: netip.MustParseAddr("198.18.0.1"), PortMin: 22, PortMax: 22}}}
	counter := firewall.Rule{Handle: 902, Verdict: firewall.Verdict{Kind: firewall.VerdictContinue}}
	notrack := firewall.Rule{Handle: 903, Conds: []firewall.Cond{fwtest.Udp(), fwtest.Dport(53)}, Verdict: firewall.Verdict{Kind: firewall.VerdictContinue}, Writes: []string{"xt target CT"}}
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if t.Family != firewall.FamilyIP || t.Name != "nat" {
			continue
		}
		for ci := range t.Chains {
			if t.Chains[ci].Name == "PREROUTING" {
				t.Chains[ci].Rules = append(t.Chains[ci].Rules, counter, dnat)
			}
		}
	}
	rs.Tables = append(rs.Tables, firewall.Table{Family: firewall.FamilyIP, Name: "raw", Chains: []firewall.Chain{
		fwtest.Base("PREROUTING", "prerouting", -300, "accept", notrack)}})
	plan, err := PlannedRevert(rs, &node, "n1")
	if err != nil {
		t.Fatal(err)
	}
	_, rules, err := Unbooted(rs, "", plan, nil)
	if err != nil || len(rules) != 2 {
		t.Fatalf("Unbooted named %q, %v; want the DNAT and the notrack", rules, err)
	}
	if !strings.Contains(rules[0], "table ip nat chain PREROUTING") || !strings.Contains(rules[0], "# handle 901") || !strings.Contains(rules[0], "dnat") {
		t.Errorf("the DNAT is named %q", rules[0])
	}
	if !strings.Contains(rules[1], "table ip raw chain PREROUTING") || !strings.Contains(rules[1], "# handle 903") {
		t.Errorf("the notrack is named %q", rules[1])
	}
	declared := "table ip nat {\n\tchain PREROUTING { type nat hook prerouting priority dstnat; }\n}\n"
	if _, rules, err := Unbooted(rs, declared, plan, nil); err != nil || len(rules) != 1 || !strings.Contains(rules[0], "handle 903") {
		t.Errorf("with table ip nat declared in the boot file, Unbooted named %q, %v; want the raw rule only", rules, err)
	}
}
