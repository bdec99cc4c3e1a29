package main

import (
	"strings"
	"testing"

	"adoption/firewall/flip"
)

// `adopt preview` prints each rule the evaluator could not decode with its
// chain, handle and the part not decoded, and the refusal under it.
func TestPreviewPrintsUndecodedRules(t *testing.T) {
	u := flip.Undecoded{Family: "inet", Table: "host", Chain: "input", Handle: 5, Verdict: "drop", What: "expression *expr.Socket not decoded"}
	pv := &flip.Preview{Undecoded: []flip.Undecoded{u}, Reasons: []string{"not decoded: " + u.Text() + "; rewrite or remove the rule"}}
	var b strings.Builder
	printPreview(&b, pv, 200)
	out := b.String()
	for _, want := range []string{"NOT DECODED", "chain inet host input, rule handle 5 (drop): expression *expr.Socket not decoded", "REFUSED:"} {
		if !strings.Contains(out, want) {
			t.Errorf("preview output lacks %q:\n%s", want, out)
		}
	}
}
