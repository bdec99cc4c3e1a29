// This file holds the read-only probe of the found firewall: list, name
// its kind, summarise, evaluate.

package eval

import (
	"context"
	"fmt"
	"sync"
	"time"

	"adoption/firewall"
	"adoption/firewall/nft"
)

// Inspector reads the found firewall of one network namespace. It only
// lists: nothing it does changes the ruleset.
type Inspector struct {
	Netns string // node.netns; "" for the worker's own namespace
	// Engine, when set, is the node's container engine: the bridges it
	// names are the node's container bridges (firewall.Node.EngineBridges).
	// Nil, or an engine that cannot be reached: bridges are decided by the
	// node's links alone.
	Engine Networks
	// Kept, when set, keeps the last listing: a listing while the kernel
	// still holds that ruleset is answered from it (nft.Kept).
	Kept *nft.Kept
}

// Networks lists a container engine's bridge networks (containers.Engine).
type Networks interface {
	BridgeNetworks(ctx context.Context) ([]firewall.EngineNetwork, error)
}

// engineAsk bounds the question to the engine when the caller gives no
// deadline (Node).
const engineAsk = 10 * time.Second

// Inspect lists the ruleset, names its kind, summarises its tables with
// their owners, reads the node's interfaces and forwarding, and evaluates
// which ports are open (through DNAT, by the ports clients use). An unsupported kind is reported in
// Report.Unsupported rather than as an error, so the probe still shows it.
func (i Inspector) Inspect(ctx context.Context) (Report, error) {
	// The node and the legacy tables are read beside the listing: they do
	// not depend on it.
	type nodeRead struct {
		node firewall.Node
		err  error
	}
	nodec := make(chan nodeRead, 1)
	go func() {
		n, err := i.readNode(ctx)
		nodec <- nodeRead{n, err}
	}()
	type legacyRead struct {
		legacy []string
		err    error
	}
	legacyc := make(chan legacyRead, 1)
	go func() {
		l, err := nft.LegacyTables(i.Netns)
		legacyc <- legacyRead{l, err}
	}()
	rs, err := i.Ruleset()
	if err != nil {
		return Report{}, err
	}
	lr := <-legacyc
	legacy, err := lr.legacy, lr.err
	if err != nil {
		return Report{}, err
	}
	r := Report{Tables: Summarise(rs), Open: []firewall.Opening{}}
	kind, err := nft.Kind(rs, legacy)
	if err != nil {
		r.Kind = "unsupported"
		r.Unsupported = err.Error()
		return r, nil
	}
	r.Kind = kind
	// Compiled once for the three evaluations, while the node is read.
	cf := Compile(rs)
	nr := <-nodec
	node, err := nr.node, nr.err
	if err != nil {
		r.NodeError = fmt.Sprintf("the node's interfaces and forwarding could not be read (%v): interface names and forwarding are taken as unknown", err)
		node = firewall.Node{}
	}
	r.Node = node
	// The three evaluations only read rs and node: they run side by side.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.Classes = cf.ClassOpenings(node)
	}()
	go func() {
		defer wg.Done()
		r.Containers = cf.BridgeOpenings(node)
	}()
	r.Open = cf.OpenPortsOn(node)
	wg.Wait()
	if r.Open == nil {
		r.Open = []firewall.Opening{}
	}
	return r, nil
}

// Ruleset lists the namespace's whole ruleset into the model.
func (i Inspector) Ruleset() (*firewall.Ruleset, error) {
	// One socket for every request (dialLasting): a listing asks once per
	// chain and set, and a socket opened anew each time (in another
	// namespace, from a thread moved there) costs about as much as the
	// request itself (7-9 ms against 4-5 ms for the bench's 77 chains).
	conn, closeNS, err := nft.DialLasting(i.Netns)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = conn.CloseLasting()
		_ = closeNS()
	}()
	if i.Kept != nil {
		return i.Kept.List(conn)
	}
	return nft.List(conn)
}

// Summarise describes every table and chain without their rules.
func Summarise(rs *firewall.Ruleset) []TableSummary {
	out := make([]TableSummary, 0, len(rs.Tables))
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		ts := TableSummary{Family: t.Family, Name: t.Name, Ownership: firewall.TableOwner(t), Chains: []ChainSummary{}}
		for ci := range t.Chains {
			c := &t.Chains[ci]
			cs := ChainSummary{Name: c.Name, Hook: c.Hook, Policy: c.Policy, Rules: len(c.Rules), Ownership: firewall.ChainOwner(t, c)}
			if c.Hook != "" {
				prio := c.Priority
				cs.Priority = &prio
			}
			ts.Chains = append(ts.Chains, cs)
		}
		out = append(out, ts)
	}
	return out
}

// Node reads the node's interfaces and forwarding switches (ReadNode), and
// the bridges of its container engine.
func (i Inspector) Node() (firewall.Node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), engineAsk)
	defer cancel()
	return i.readNode(ctx)
}

// readNode is ReadNode with EngineBridges filled in from i.Engine when it
// answers; when it does not, they stay unknown (nil).
func (i Inspector) readNode(ctx context.Context) (firewall.Node, error) {
	node, err := firewall.ReadNode(i.Netns)
	if err != nil || i.Engine == nil {
		return node, err
	}
	if nets, err := i.Engine.BridgeNetworks(ctx); err == nil {
		node.EngineBridges = firewall.EngineBridges(nets)
	}
	return node, nil
}
