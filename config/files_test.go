package config

import (
	"strings"
	"testing"
)

// The example a message names is the one that exists where the operator
// is: the package's on an installed host, else the source tree's.
func TestExampleWhereTheOperatorIs(t *testing.T) {
	defer func(e func(string) bool) { exists = e }(exists)
	exists = func(p string) bool { return p == "/etc/adoption/node.example.yaml" }
	if got := Example(NodeFile); got != "/etc/adoption/node.example.yaml" {
		t.Errorf("installed: %q", got)
	}
	_, err := Load(writeTemp(t, "labels: {a: b}\n"))
	if err == nil || !strings.Contains(err.Error(), "labels: unknown key; remove it or check its spelling against /etc/adoption/node.example.yaml") {
		t.Errorf("installed, unknown key: %v", err)
	}
	exists = func(string) bool { return false }
	if got := Example(NodeFile); got != "config/node.example.yaml (in adoption's source tree)" {
		t.Errorf("nowhere: %q", got)
	}
	if msg := NoConfiguration(NodeFile); !strings.Contains(msg, "the packages' is /etc/adoption/node.yaml, not present here") {
		t.Errorf("no configuration, nothing installed: %s", msg)
	}
	exists = func(p string) bool { return p == DefaultNodeFile }
	if msg := NoConfiguration(NodeFile); !strings.Contains(msg, "try --config /etc/adoption/node.yaml, which exists") {
		t.Errorf("no configuration, installed: %s", msg)
	}
}

// Load records where temporal.address came from, for a dial's error.
func TestAddressFrom(t *testing.T) {
	p := writeTemp(t, "node: {name: n1}\nauthority: {unsigned: true}\ntemporal: {address: 127.0.0.1:7233}\n")
	c, err := Load(p)
	if err != nil || c.Temporal.AddressFrom != "temporal.address in "+p || c.Temporal.NamespaceFrom != "temporal.namespace's default" {
		t.Fatalf("from the file: %+v %v", c, err)
	}
	t.Setenv("ADOPT_TEMPORAL_ADDRESS", "127.0.0.1:7234")
	if c, err = Load(p); err != nil || c.Temporal.AddressFrom != "ADOPT_TEMPORAL_ADDRESS" {
		t.Fatalf("from the environment: %+v %v", c, err)
	}
}
