package firewall

import "testing"

func TestFoundFingerprintIgnoresMarksAndHandles(t *testing.T) {
	base := func() *Ruleset {
		return &Ruleset{Tables: []Table{{Family: "ip", Name: "filter", Chains: []Chain{{
			Name: "ufw-user-input", Rules: []Rule{
				{Handle: 5, Conds: []Cond{{Kind: CondDport, Ports: []PortRange{{From: 22, To: 22}}}}, Verdict: Verdict{Kind: VerdictAccept}},
			}}}}}}
	}
	a := FoundFingerprint(base())

	marked := base()
	c := &marked.Tables[0].Chains[0]
	c.Rules = append([]Rule{{Handle: 9, Comment: "adoption:n1:foundation:5001/tcp", Verdict: Verdict{Kind: VerdictAccept}}}, c.Rules...)
	c.Rules[1].Handle = 77 // a reload gives new handles
	marked.Tables = append(marked.Tables, Table{Family: "inet", Name: "adoption"})
	if FoundFingerprint(marked) != a {
		t.Fatal("a mark, new handles or the mesh's table changed the found fingerprint")
	}

	edited := base()
	edited.Tables[0].Chains[0].Rules[0].Conds[0].Ports[0] = PortRange{From: 2222, To: 2222}
	if FoundFingerprint(edited) == a {
		t.Fatal("a rule changed by hand did not change the found fingerprint")
	}
	added := base()
	added.Tables[0].Chains[0].Rules = append(added.Tables[0].Chains[0].Rules, Rule{Verdict: Verdict{Kind: VerdictDrop}})
	if FoundFingerprint(added) == a {
		t.Fatal("a rule added by hand did not change the found fingerprint")
	}
}
