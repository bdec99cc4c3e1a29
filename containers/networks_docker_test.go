package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"adoption/firewall"
	"adoption/internal/testenv"
)

// A network created with a custom bridge name is, from the engine's answer,
// a Docker bridge of the node, as is one Docker names itself (br-<id>);
// the node's links alone call the custom one a bridge of no known tool.
// The networks go when the test ends.
func TestDockerBridgeNetworks(t *testing.T) {
	if testenv.UnitOnly() {
		t.Skipf("needs the Docker engine: %s is set", testenv.UnitOnlyVar)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatalf("Docker engine unreachable (start dockerd; apt-get install -y docker.io): %v", err)
	}
	prefix := "ct-" + randHex(5)
	custom := "ctb" + randHex(4) // an interface name: at most 15 characters
	made := map[string]string{}
	for name, opts := range map[string]map[string]string{
		prefix + "-custom": {firewall.DockerBridgeOption: custom},
		prefix + "-plain":  nil,
	} {
		r, err := cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Options: opts})
		if err != nil {
			t.Fatalf("create network %s: %v", name, err)
		}
		made[name] = r.ID
		t.Cleanup(func() {
			if err := cli.NetworkRemove(context.Background(), r.ID); err != nil {
				t.Errorf("remove network %s: %v", name, err)
			}
		})
	}
	plain := "br-" + made[prefix+"-plain"][:12]

	nets, err := New().BridgeNetworks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bridges := firewall.EngineBridges(nets)
	want := []string{custom, plain}
	if slices.ContainsFunc(nets, func(n firewall.EngineNetwork) bool { return n.Name == "bridge" }) {
		want = append(want, "docker0") // the default network, unless dockerd runs with --bridge=none
	}
	for _, name := range want {
		if bridges[name] != "docker" {
			t.Errorf("engine bridges %v: %s is not Docker's", bridges, name)
		}
	}
	node, err := firewall.ReadNode("") // the engine's own namespace; read only
	if err != nil {
		t.Fatal(err)
	}
	if tool := node.BridgeTool(custom); tool != "bridge" {
		t.Errorf("by the links alone, %s is %q, want a bridge of no known tool", custom, tool)
	}
	node.EngineBridges = bridges
	for _, name := range []string{custom, plain} {
		if tool := node.BridgeTool(name); tool != "docker" {
			t.Errorf("with the engine's answer, %s is %q, want docker", name, tool)
		}
		if slices.Contains(node.Uplinks(), name) {
			t.Errorf("uplinks %v hold the container bridge %s", node.Uplinks(), name)
		}
		if !slices.Contains(node.Behind(), name) {
			t.Errorf("the networks behind the node %v lack %s", node.Behind(), name)
		}
	}
}

// An engine that cannot be reached names itself in the error: the
// evaluator then decides bridges by the node's links.
func TestBridgeNetworksUnreachable(t *testing.T) {
	_, err := NewAt("unix:///nonexistent/docker.sock").BridgeNetworks(context.Background())
	if err == nil {
		t.Fatal("no error from an engine at a socket that does not exist")
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
