package firewall

import (
	"net/netip"
	"strings"
	"testing"

	"adoption/config"
)

// The preview on the ufw-docker node of testdata/dnat: published ports get
// their fates by host port, through DNAT, before and after the flip.

func dnatSpec(drop ...config.Port) MeshSpec {
	return MeshSpec{Node: "n1",
		Input: []Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: OwnerManagement}},
		Forward: []Allow{
			{Port: config.Port{Num: 18080, Proto: "tcp"}, Owner: "web"},
			{Port: config.Port{Num: 18081, Proto: "tcp"}, Owner: "web"},
			{Port: config.Port{Num: 18083, Proto: "tcp"}, Owner: "web"},
			{Port: config.Port{Num: 18053, Proto: "udp"}, Owner: "dns"},
		},
		Drop: drop,
	}
}

func TestPreviewPublishedPortsByHostPort(t *testing.T) {
	rs, node := loadFixture(t, "ufw-docker")
	p := PreviewFlipOn(rs, node, dnatSpec())
	reasons := strings.Join(p.Reasons, "\n")
	if p.Approved || !strings.Contains(reasons, "18082/tcp (forward, ip, to 172.17.0.2:8082, from 10.0.0.0/8) is open now and would close") {
		t.Errorf("want a refusal naming the undeclared published 18082 by host port; reasons:\n%s", reasons)
	}
	if strings.Contains(reasons, "8080/") || strings.Contains(reasons, "8082/tcp (") && !strings.Contains(reasons, "18082") {
		t.Errorf("a container port in the reasons:\n%s", reasons)
	}
	p = PreviewFlipOn(rs, node, dnatSpec(config.Port{Num: 18082, Proto: "tcp"}, config.Port{Num: 19100, Proto: "tcp"}))
	if !p.Approved {
		t.Fatalf("with 18082 and 19100 dropped: refused:\n%s", strings.Join(p.Reasons, "\n"))
	}
	for _, w := range []struct {
		fam   string
		proto string
		port  uint16
		by    string
	}{{FamilyIP, "tcp", 18080, "web"}, {FamilyIP6, "tcp", 18080, "web"}, {FamilyIP, "udp", 18053, "dns"}, {FamilyIP, "tcp", 22, OwnerManagement}} {
		seen := false
		for _, f := range p.Fates {
			o := f.Opening
			if o.Family == w.fam && o.Proto == w.proto && o.Port == w.port && o.From == "" {
				seen = true
				if f.Fate != FateKept || f.By != w.by {
					t.Errorf("%s %d/%s: %+v; want kept by %s", w.fam, w.port, w.proto, f, w.by)
				}
			}
		}
		if !seen {
			t.Errorf("%s %d/%s: no fate", w.fam, w.port, w.proto)
		}
	}
}

func TestPreviewEssentialsKeepDHCP(t *testing.T) {
	udp67to68 := Rule{Conds: []Cond{udp(), {Kind: CondSport, Ports: []PortRange{{67, 67}}}, dport(68)}, Verdict: Verdict{Kind: VerdictAccept}}
	found := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "filter", Chains: []Chain{
		base("INPUT", HookInput, 0, "drop", accept(tcp(), dport(22)), udp67to68),
		base("FORWARD", HookForward, 0, "drop"),
	}}}}
	spec := MeshSpec{Node: "n1", Input: []Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: OwnerManagement}}}
	p := PreviewFlipOn(found, Node{Interfaces: []Interface{{Name: "eth0"}}, Forwarding: map[string]bool{FamilyIP: false, FamilyIP6: false}}, spec)
	var dhcp *Fate
	for i, f := range p.Fates {
		if f.Opening.Port == 68 && f.Opening.Proto == "udp" && f.Opening.Family == FamilyIP {
			dhcp = &p.Fates[i]
		}
	}
	if dhcp == nil || dhcp.Fate != FateKept || dhcp.By != OwnerEssentials {
		t.Errorf("68/udp (ufw's DHCP client rule): %+v; want kept by essentials", dhcp)
	}
	for _, r := range p.Reasons {
		if strings.Contains(r, "68/udp (input, ip") {
			t.Errorf("the preview names DHCP: %s", r)
		}
	}
	// Not allowed by the found firewall: not in the derived ruleset either.
	found.Tables[0].Chains[0].Rules = found.Tables[0].Chains[0].Rules[:1]
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.Text(), "sport 67") {
		t.Errorf("DHCP kept though the found firewall did not accept it:\n%s", d.Text())
	}
}

func TestOwnership(t *testing.T) {
	rs, _ := loadFixture(t, "ufw-docker")
	got := map[string]Ownership{}
	for ti := range rs.Tables {
		tb := &rs.Tables[ti]
		for ci := range tb.Chains {
			got[tb.Family+" "+tb.Name+" "+tb.Chains[ci].Name] = ChainOwner(tb, &tb.Chains[ci])
		}
	}
	for k, w := range map[string]Ownership{
		"ip filter DOCKER":           {Owner: OwnedByForeign, Tool: "docker"},
		"ip filter DOCKER-USER":      {Owner: OwnedByForeign, Tool: "docker"},
		"ip filter ufw-user-forward": {Owner: OwnedByPredecessor},
		"ip filter FORWARD":          {Owner: OwnedShared},
		"ip nat DOCKER":              {Owner: OwnedByForeign, Tool: "docker"},
	} {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	for name, tool := range map[string]string{"f2b-sshd": "fail2ban", "crowdsec-chain": "crowdsec", "LIBVIRT_INP": "libvirt",
		"ts-input": "tailscale", "KUBE-SERVICES": "kube-proxy", "NETAVARK_FORWARD": "podman", "ufw-user-input": ""} {
		if ChainTool(name) != tool {
			t.Errorf("ChainTool(%q) = %q, want %q", name, ChainTool(name), tool)
		}
	}
	mesh := &Table{Family: FamilyInet, Name: MeshTable}
	if TableOwner(mesh).Owner != OwnedByMesh {
		t.Errorf("table inet adoption: %+v", TableOwner(mesh))
	}
	// Docker recreating a container (a new address in its DNAT and its
	// DOCKER accept) is not drift of the found firewall.
	before := FoundFingerprint(rs)
	b, _ := loadFixture(t, "ufw-docker")
	for ti := range b.Tables {
		for ci := range b.Tables[ti].Chains {
			ch := &b.Tables[ti].Chains[ci]
			if ch.Name != "DOCKER" {
				continue
			}
			for ri := range ch.Rules {
				r := &ch.Rules[ri]
				if r.Verdict.NAT != nil {
					r.Verdict.NAT.Addr = r.Verdict.NAT.Addr.Next()
				}
				for k := range r.Conds {
					if r.Conds[k].Kind == CondDaddr {
						r.Conds[k].Prefixes[0], _ = r.Conds[k].Prefixes[0].Addr().Next().Prefix(32)
					}
				}
			}
		}
	}
	if FoundFingerprint(b) != before {
		t.Error("Docker's churn changed the found fingerprint")
	}
}

// ufw's DHCPv6 client rule (before6.rules: udp from fe80::/10 port 547 to
// fe80::/10 port 546) is kept by essentials, not named; without it in the
// found firewall the derived ruleset does not accept 547 -> 546.
func TestPreviewEssentialsKeepDHCP6(t *testing.T) {
	ll := netip.MustParsePrefix("fe80::/10")
	udp547to546 := Rule{Conds: []Cond{udp(), {Kind: CondSaddr, Prefixes: []netip.Prefix{ll}}, {Kind: CondDaddr, Prefixes: []netip.Prefix{ll}},
		{Kind: CondSport, Ports: []PortRange{{547, 547}}}, dport(546)}, Verdict: Verdict{Kind: VerdictAccept}}
	found := &Ruleset{Tables: []Table{{Family: FamilyIP6, Name: "filter", Chains: []Chain{
		base("INPUT", HookInput, 0, "drop", accept(tcp(), dport(22)), udp547to546),
		base("FORWARD", HookForward, 0, "drop"),
	}}}}
	spec := MeshSpec{Node: "n1", Input: []Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: OwnerManagement}}}
	p := PreviewFlipOn(found, Node{Interfaces: []Interface{{Name: "eth0"}}, Forwarding: map[string]bool{FamilyIP: false, FamilyIP6: false}}, spec)
	// Link-local sources are not outside clients: the evaluator lists no
	// opening for it, and where it does, it must be kept by essentials.
	for _, f := range p.Fates {
		if f.Opening.Port <= 546 && 546 <= max(f.Opening.Port, f.Opening.PortEnd) && f.Opening.Proto == "udp" && f.Opening.Family == FamilyIP6 &&
			(f.Fate != FateKept || f.By != OwnerEssentials) {
			t.Errorf("546/udp (ufw's DHCPv6 client rule): %+v; want kept by essentials", f)
		}
	}
	for _, r := range p.Reasons {
		if strings.Contains(r, "546/udp") {
			t.Errorf("the preview names DHCPv6: %s", r)
		}
	}
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text(), "udp sport 547 udp dport 546 accept") {
		t.Errorf("DHCPv6 replies not kept though the found firewall accepts them:\n%s", d.Text())
	}
	found.Tables[0].Chains[0].Rules = found.Tables[0].Chains[0].Rules[:1]
	if d, err = DeriveFor(found, spec); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.Text(), "sport 547") {
		t.Errorf("DHCPv6 kept though the found firewall did not accept it:\n%s", d.Text())
	}
}
