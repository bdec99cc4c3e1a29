package eval

import (
	"context"
	"errors"
	"testing"

	"adoption/firewall"
)

type fakeNetworks struct {
	nets []firewall.EngineNetwork
	err  error
}

func (f fakeNetworks) BridgeNetworks(context.Context) ([]firewall.EngineNetwork, error) {
	return f.nets, f.err
}

// The node the Inspector reads carries the bridges its engine names; an
// engine that does not answer leaves them unknown, and no engine too.
func TestInspectorNodeAsksTheEngine(t *testing.T) {
	nets := []firewall.EngineNetwork{{Name: "lan", ID: "0123456789abcdef", Driver: "bridge", Options: map[string]string{firewall.DockerBridgeOption: "lan0"}}}
	node, err := Inspector{Engine: fakeNetworks{nets: nets}}.Node()
	if err != nil {
		t.Fatal(err)
	}
	if node.EngineBridges["lan0"] != "docker" || !node.HasInterfaces() {
		t.Errorf("engine bridges %v (interfaces read: %v), want lan0 Docker's", node.EngineBridges, node.HasInterfaces())
	}
	for name, in := range map[string]Inspector{"unreachable": {Engine: fakeNetworks{err: errors.New("no engine")}}, "none": {}} {
		node, err := in.Node()
		if err != nil {
			t.Fatal(err)
		}
		if node.EngineBridges != nil {
			t.Errorf("%s engine: bridges %v, want unknown", name, node.EngineBridges)
		}
	}
}
