package config

import (
	"encoding/json"
	"testing"
)

// A reference goes through JSON unchanged; a whole plan where a reference
// goes (an older request) reads as that plan's reference; a plan without
// its digests' kind is named as sha256's.
func TestPlanRefReadsAReferenceOrAWholePlan(t *testing.T) {
	p := Plan{Node: "n1", Role: "member", Modules: []ModulePlan{{Name: "web", Ports: []Port{{Num: 8080, Proto: "tcp"}}}}}
	var back PlanRef
	b, _ := json.Marshal(p.Ref())
	if err := json.Unmarshal(b, &back); err != nil || back != p.Ref() {
		t.Fatalf("reference through JSON: %+v, %v (want %+v)", back, err, p.Ref())
	}
	whole, _ := json.Marshal(p)
	var fromWhole PlanRef
	if err := json.Unmarshal(whole, &fromWhole); err != nil || fromWhole != p.Ref() {
		t.Fatalf("whole plan read as %+v, %v (want %+v)", fromWhole, err, p.Ref())
	}
	if fromWhole.Digests != DigestSHA256 || len(fromWhole.Hash) != 64 {
		t.Fatalf("reference of a plan with no digests' kind: %+v", fromWhole)
	}
	q := Plan{Node: "n1", Role: "member", Modules: []ModulePlan{{Name: "web", Ports: []Port{{Num: 8080, Proto: "tcp"}, {Num: 2375, Proto: "tcp"}}}}}
	if q.Ref().Hash == p.Ref().Hash {
		t.Fatal("two plans that differ by a port are named alike")
	}
	if err := json.Unmarshal([]byte(`"n1"`), &back); err == nil {
		t.Fatal("a string read as a reference")
	}
}
