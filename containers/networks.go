// This file holds the engine's networks as the firewall's evaluator needs
// them: which bridges of the node are the engine's (firewall.EngineBridges
// decides the interface names).

package containers

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"adoption/firewall"
)

// BridgeNetworks lists the engine's networks of the bridge driver, with
// their options (the bridge's custom name among them). An unreachable
// engine is an error, named: the caller then decides bridges by the
// node's links alone.
func (e *Engine) BridgeNetworks(ctx context.Context) ([]firewall.EngineNetwork, error) {
	if e.err != nil {
		return nil, fmt.Errorf("%s", e.unreachable(e.err))
	}
	list, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("driver", "bridge"))})
	if err != nil {
		return nil, fmt.Errorf("%s", e.unreachable(err))
	}
	out := make([]firewall.EngineNetwork, 0, len(list))
	for _, n := range list {
		out = append(out, firewall.EngineNetwork{Name: n.Name, ID: n.ID, Driver: n.Driver, Options: n.Options})
	}
	return out, nil
}
