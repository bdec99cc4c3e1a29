package config

import (
	"strings"
	"testing"
)

// flip.witness reaches the plan as given; a bad address or source is named
// with its key and what to write instead, and an empty one stays out of the
// plan (its hash unchanged for nodes that do not set it).
func TestFlipWitness(t *testing.T) {
	c, err := Load(write(t, `
node: {name: n1}
flip:
  witness: {address: n1.example.net, from: 10.8.0.2}
`))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Plan().Witness; w == nil || w.Address != "n1.example.net" || w.From != "10.8.0.2" {
		t.Errorf("plan witness %+v", w)
	}
	c, err = Load(write(t, "node: {name: n1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Plan().Witness; w != nil {
		t.Errorf("no flip.witness, yet plan witness %+v", w)
	}
	_, err = Load(write(t, `
node: {name: n1}
flip:
  witness: {address: "ssh://n1:22", from: "eth0"}
`))
	if err == nil || !strings.Contains(err.Error(), `flip.witness.address: "ssh://n1:22" is invalid`) || !strings.Contains(err.Error(), `flip.witness.from: "eth0" is invalid`) {
		t.Errorf("a bad flip.witness: %v", err)
	}
	_, err = Load(write(t, `
node: {name: n1}
flip:
  witness: {address: 203.0.113.7, disabled: true}
`))
	if err == nil || !strings.Contains(err.Error(), `flip.witness.disabled: "true" is invalid`) {
		t.Errorf("a witness named and disabled: %v", err)
	}
}

// flip.witness.key reaches the plan as the witness's public key; a line
// that is not one is named with the key.
func TestFlipWitnessKey(t *testing.T) {
	c, err := Load(write(t, "node: {name: n1}\nflip:\n  witness:\n    key: |\n      "+keyAlice+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.Plan().Witness.Keys()
	if err != nil || len(keys) != 1 || keys[0].Type() != "ssh-ed25519" {
		t.Fatalf("plan witness keys %v, %v", keys, err)
	}
	_, err = Load(write(t, "node: {name: n1}\nflip:\n  witness: {key: \"ssh-ed25519 not-a-key\"}\n"))
	if err == nil || !strings.Contains(err.Error(), "flip.witness.key") || !strings.Contains(err.Error(), "ssh-keygen -y") {
		t.Fatalf("a bad flip.witness.key: %v", err)
	}
}
