package flip

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// The preview on the ufw-docker node of fwtest's testdata/dnat: published ports get
// their fates by host port, through DNAT, before and after the flip.

func dnatSpec(drop ...vocab.Port) MeshSpec {
	return MeshSpec{Node: "n1",
		Input: []Allow{{Port: vocab.Port{Num: 22, Proto: "tcp"}, Owner: OwnerManagement}},
		Forward: []Allow{
			{Port: vocab.Port{Num: 18080, Proto: "tcp"}, Owner: "web"},
			{Port: vocab.Port{Num: 18081, Proto: "tcp"}, Owner: "web"},
			{Port: vocab.Port{Num: 18083, Proto: "tcp"}, Owner: "web"},
			{Port: vocab.Port{Num: 18053, Proto: "udp"}, Owner: "dns"},
		},
		Drop: drop,
	}
}

// routedReason matches a reason about routed forwarding: to a network
// (a prefix) behind the node.
var routedReason = regexp.MustCompile(`\(forward, ip6?, to [0-9a-f.:]+/[0-9]+`)

func TestPreviewPublishedPortsByHostPort(t *testing.T) {
	rs, node := fwtest.LoadFixture(t, "ufw-docker")
	p := PreviewFlipOn(rs, node, dnatSpec())
	reasons := strings.Join(p.Reasons, "\n")
	if p.Approved || !strings.Contains(reasons, "18082/tcp (forward, ip, to 172.17.0.2:8082, from 10.0.0.0/8) is open now and would close") {
		t.Errorf("want a refusal naming the undeclared published 18082 by host port; reasons:\n%s", reasons)
	}
	// A container port is named only where a client routes to the
	// container (to a network behind the node), never for a published one.
	for _, l := range p.Reasons {
		if (strings.HasPrefix(l, "8080/") || strings.HasPrefix(l, "8082/tcp (")) && !routedReason.MatchString(l) {
			t.Errorf("a container port in the reasons: %s", l)
		}
	}
	// Routed to the container (ufw's route allow 8080, 8081 and 8053,
	// ufw-docker's private sources): after the flip Docker's own chains
	// decide routed traffic, and they pass only the container's published
	// ports; the preview names the rest closing.
	for _, w := range []string{"8080/tcp (forward, ip, to 172.17.0.0/16) is open now and would close", "8081-8083/tcp (forward, ip, to 172.17.0.2/32, from 10.0.0.0/8) is open now and would close"} {
		if !strings.Contains(reasons, w) {
			t.Errorf("reasons lack %q:\n%s", w, reasons)
		}
	}
	routed := vocab.MustPorts([]string{"8080/tcp", "8081/tcp", "8082/tcp", "8083/tcp", "9100/tcp", "8053/udp"})
	p = PreviewFlipOn(rs, node, dnatSpec(append(routed, vocab.Port{Num: 18082, Proto: "tcp"}, vocab.Port{Num: 19100, Proto: "tcp"})...))
	if !p.Approved {
		t.Fatalf("with 18082 and 19100 dropped, and the routed ports: refused:\n%s", strings.Join(p.Reasons, "\n"))
	}
	for _, w := range []struct {
		fam   string
		proto string
		port  uint16
		by    string
	}{{firewall.FamilyIP, "tcp", 18080, "web"}, {firewall.FamilyIP6, "tcp", 18080, "web"}, {firewall.FamilyIP, "udp", 18053, "dns"}, {firewall.FamilyIP, "tcp", 22, OwnerManagement}} {
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
	udp67to68 := firewall.Rule{Conds: []firewall.Cond{fwtest.Udp(), {Kind: firewall.CondSport, Ports: []firewall.PortRange{{From: 67, To: 67}}}, fwtest.Dport(68)}, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}
	found := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{
		fwtest.Base("INPUT", firewall.HookInput, 0, "drop", fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)), udp67to68),
		fwtest.Base("FORWARD", firewall.HookForward, 0, "drop"),
	}}}}
	spec := MeshSpec{Node: "n1", Input: []Allow{{Port: vocab.Port{Num: 22, Proto: "tcp"}, Owner: OwnerManagement}}}
	p := PreviewFlipOn(found, firewall.Node{Interfaces: []firewall.Interface{{Name: "eth0"}}, Forwarding: map[string]bool{firewall.FamilyIP: false, firewall.FamilyIP6: false}}, spec)
	var dhcp *Fate
	for i, f := range p.Fates {
		if f.Opening.Port == 68 && f.Opening.Proto == "udp" && f.Opening.Family == firewall.FamilyIP {
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
	rs, _ := fwtest.LoadFixture(t, "ufw-docker")
	got := map[string]firewall.Ownership{}
	for ti := range rs.Tables {
		tb := &rs.Tables[ti]
		for ci := range tb.Chains {
			got[tb.Family+" "+tb.Name+" "+tb.Chains[ci].Name] = firewall.ChainOwner(tb, &tb.Chains[ci])
		}
	}
	for k, w := range map[string]firewall.Ownership{
		"ip filter DOCKER":           {Owner: firewall.OwnedByForeign, Tool: "docker"},
		"ip filter DOCKER-USER":      {Owner: firewall.OwnedByForeign, Tool: "docker"},
		"ip filter ufw-user-forward": {Owner: firewall.OwnedByPredecessor},
		"ip filter FORWARD":          {Owner: firewall.OwnedShared},
		"ip nat DOCKER":              {Owner: firewall.OwnedByForeign, Tool: "docker"},
	} {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	for name, tool := range map[string]string{"f2b-sshd": "fail2ban", "crowdsec-chain": "crowdsec", "LIBVIRT_INP": "libvirt",
		"ts-input": "tailscale", "KUBE-SERVICES": "kube-proxy", "NETAVARK_FORWARD": "podman", "ufw-user-input": ""} {
		if firewall.ChainTool(name) != tool {
			t.Errorf("ChainTool(%q) = %q, want %q", name, firewall.ChainTool(name), tool)
		}
	}
	mesh := &firewall.Table{Family: firewall.FamilyInet, Name: firewall.MeshTable}
	if firewall.TableOwner(mesh).Owner != firewall.OwnedByMesh {
		t.Errorf("table inet adoption: %+v", firewall.TableOwner(mesh))
	}
	// Docker recreating a container (a new address in its DNAT and its
	// DOCKER accept) is not drift of the found firewall.
	before := FoundFingerprint(rs)
	b, _ := fwtest.LoadFixture(t, "ufw-docker")
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
					if r.Conds[k].Kind == firewall.CondDaddr {
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
	udp547to546 := firewall.Rule{Conds: []firewall.Cond{fwtest.Udp(), {Kind: firewall.CondSaddr, Prefixes: []netip.Prefix{ll}}, {Kind: firewall.CondDaddr, Prefixes: []netip.Prefix{ll}},
		{Kind: firewall.CondSport, Ports: []firewall.PortRange{{From: 547, To: 547}}}, fwtest.Dport(546)}, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}
	found := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP6, Name: "filter", Chains: []firewall.Chain{
		fwtest.Base("INPUT", firewall.HookInput, 0, "drop", fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)), udp547to546),
		fwtest.Base("FORWARD", firewall.HookForward, 0, "drop"),
	}}}}
	spec := MeshSpec{Node: "n1", Input: []Allow{{Port: vocab.Port{Num: 22, Proto: "tcp"}, Owner: OwnerManagement}}}
	p := PreviewFlipOn(found, firewall.Node{Interfaces: []firewall.Interface{{Name: "eth0"}}, Forwarding: map[string]bool{firewall.FamilyIP: false, firewall.FamilyIP6: false}}, spec)
	// Link-local sources are not outside clients: the evaluator lists no
	// opening for it, and where it does, it must be kept by essentials.
	for _, f := range p.Fates {
		if f.Opening.Port <= 546 && 546 <= max(f.Opening.Port, f.Opening.PortEnd) && f.Opening.Proto == "udp" && f.Opening.Family == firewall.FamilyIP6 &&
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
