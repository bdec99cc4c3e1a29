// Package fake holds in-memory stand-ins for a node's parts as package
// activities declares them (Firewall, Marks, Flipper, Containers, Cutover,
// Sockets): the found firewall, its marks and flip, the container engine
// and its cutover, the sockets. It sits beside those interfaces and
// imports none of activities. Each answers at once from its fields, so
// the activities' unit tests and the bench's simulated nodes run the real
// activities on the same fakes. Production code never imports it; fakes
// of one package's own internals (the Docker client, the Temporal client)
// stay there.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"adoption/config"
	"adoption/containers"
	"adoption/containers/cutover"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
	"adoption/firewall/nft"
	"adoption/sockets"
)

// Firewall reports Report and lists Rules (an empty ruleset, nothing
// filtered, when Rules is nil).
type Firewall struct {
	Report eval.Report
	Rules  *firewall.Ruleset
}

func (f Firewall) Inspect(context.Context) (eval.Report, error) { return f.Report, nil }

func (f Firewall) Ruleset() (*firewall.Ruleset, error) {
	if f.Rules != nil {
		return f.Rules, nil
	}
	return &firewall.Ruleset{}, nil
}

// NodeFirewall is a Firewall that also reads the node's interfaces, so a
// preview judges published ports through DNAT.
type NodeFirewall struct {
	Firewall
	Links firewall.Node
}

func (f NodeFirewall) Node() (firewall.Node, error) { return f.Links, nil }

// Listed is a firewall whose ruleset is Found, decoded afresh at each
// listing (as a kernel listing would be), and whose Inspect evaluates it.
type Listed struct{ Found json.RawMessage }

func (f Listed) Ruleset() (*firewall.Ruleset, error) {
	var rs firewall.Ruleset
	return &rs, json.Unmarshal(f.Found, &rs)
}

func (f Listed) Inspect(context.Context) (eval.Report, error) {
	rs, err := f.Ruleset()
	if err != nil {
		return eval.Report{}, err
	}
	kind, _ := nft.Kind(rs, nil)
	return eval.Report{Kind: kind, Tables: eval.Summarise(rs), Open: eval.OpenPorts(rs)}, nil
}

// Marks opens every asked port as a marked rule in ufw-user-input and
// holds nothing: a node whose marks always succeed.
type Marks struct{}

func (Marks) Open(node, owner string, ports []config.Port) (added, present []marks.MarkedRule, err error) {
	for _, p := range ports {
		added = append(added, marks.MarkedRule{Family: "ip", Table: "filter", Chain: "ufw-user-input",
			Mark: marks.Mark{Node: node, Owner: owner, Port: p.Num, Proto: p.Proto}})
	}
	return added, nil, nil
}
func (Marks) Close(string, string) ([]marks.MarkedRule, error) { return nil, nil }
func (Marks) Release(string) ([]marks.MarkedRule, error)       { return nil, nil }
func (Marks) List(string) ([]marks.MarkedRule, error)          { return nil, nil }

// KeptMarks is Marks that remembers what it placed: a mark opened again is
// present, not added (a node whose marks nothing removes).
type KeptMarks struct {
	mu     sync.Mutex
	placed map[marks.Mark]marks.MarkedRule
}

func (k *KeptMarks) Open(node, owner string, ports []config.Port) (added, present []marks.MarkedRule, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.placed == nil {
		k.placed = map[marks.Mark]marks.MarkedRule{}
	}
	fresh, _, _ := Marks{}.Open(node, owner, ports)
	for _, r := range fresh {
		if _, ok := k.placed[r.Mark]; ok {
			present = append(present, r)
			continue
		}
		k.placed[r.Mark] = r
		added = append(added, r)
	}
	return added, present, nil
}

func (k *KeptMarks) Close(node, owner string) ([]marks.MarkedRule, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []marks.MarkedRule
	for m, r := range k.placed {
		if m.Owner == owner {
			out = append(out, r)
			delete(k.placed, m)
		}
	}
	return out, nil
}

func (k *KeptMarks) Release(node string) ([]marks.MarkedRule, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []marks.MarkedRule
	for _, r := range k.placed {
		out = append(out, r)
	}
	k.placed = nil
	return out, nil
}

func (k *KeptMarks) List(string) ([]marks.MarkedRule, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []marks.MarkedRule
	for _, r := range k.placed {
		out = append(out, r)
	}
	return out, nil
}

// Flipper flips at once and records what it was asked: the fingerprints
// each flip expected, the plans reverted, the commits. FlipErr and
// CommitErr, when set, are what those calls return.
type Flipper struct {
	Neutralised []flip.RuleRef // what each flip reports it neutralised
	ShortEchoes int
	Saved       string // the found ruleset as Commit returns it
	FlipErr     error
	CommitErr   error
	InForceErr  error // what InForce returns
	// Dormant is what each flip reports the commit deletes whole.
	Dormant []flip.ChainRef

	mu      sync.Mutex
	Flips   [][2]string // the found and derived fingerprints each flip expected
	Reverts []flip.RevertPlan
	Commits int
}

func (f *Flipper) Flip(spec flip.MeshSpec, expectFound, expectDerived string) (*flip.RevertPlan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Flips = append(f.Flips, [2]string{expectFound, expectDerived})
	if f.FlipErr != nil {
		return nil, f.FlipErr
	}
	neutralised := append([]flip.RuleRef{}, f.Neutralised...)
	return &flip.RevertPlan{Node: spec.Node, MeshTable: flip.TableRef{Family: "inet", Name: firewall.MeshTable},
		Neutralised: neutralised, ShortEchoes: f.ShortEchoes, Dormant: append([]flip.ChainRef{}, f.Dormant...), FoundFingerprint: expectFound, FlippedAt: time.Now().UTC()}, nil
}

func (f *Flipper) Revert(p *flip.RevertPlan) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Reverts = append(f.Reverts, *p)
	return nil
}

func (f *Flipper) Commit(*flip.RevertPlan) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Commits++
	if f.CommitErr != nil {
		return "", f.CommitErr
	}
	return f.Saved, nil
}

// Reassert puts nothing back: the fake's table is never gone.
func (f *Flipper) Reassert(flip.MeshSpec) (bool, error) { return false, nil }

func (f *Flipper) InForce(*flip.RevertPlan, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.InForceErr
}

// Engine is a container engine that reports Containers.
type Engine struct{ Containers containers.Report }

func (e Engine) Report(context.Context) containers.Report { return e.Containers }

// Services is an engine's report of one running container per name, each
// with a named data volume as a predecessor's services carry them. When
// publishFrom is not zero, the i-th also publishes host port publishFrom+i
// to its 8080/tcp.
func Services(names []string, publishFrom uint16) containers.Report {
	r := containers.Report{Available: true}
	for i, name := range names {
		c := containers.Info{Name: name, ID: fmt.Sprintf("%064x", i+1), Image: "registry.local/" + name + ":1", State: "running",
			Mounts: []containers.Mount{{Type: "volume", Name: name + "-data", Source: "/var/lib/docker/volumes/" + name + "-data/_data", Destination: "/data"}}}
		if publishFrom != 0 {
			c.Ports = []containers.Published{{HostIP: "0.0.0.0", HostPort: publishFrom + uint16(i), ContainerPort: 8080, Proto: "tcp"}}
		}
		r.Containers = append(r.Containers, c)
	}
	return r
}

// Cutover is a container cutover where every step succeeds at once and
// no predecessor is found; the swap and the rollback run their window
// (cutover.WithWindow) as the engine does.
type Cutover struct{}

func (Cutover) Preflight(context.Context, cutover.Spec) (*cutover.Predecessor, error) {
	return nil, nil
}
func (Cutover) Create(context.Context, cutover.Spec, *cutover.Predecessor) (*cutover.Carried, error) {
	return &cutover.Carried{}, nil
}
func (Cutover) PortsAnswer(context.Context, []uint16) error { return nil }
func (Cutover) Swap(ctx context.Context, _ string, _ time.Duration) error {
	return cutover.RunWindow(ctx)
}
func (Cutover) WaitHealthy(context.Context, string, func(context.Context) error, time.Duration) error {
	return nil
}
func (Cutover) Rollback(ctx context.Context, _ string) error { return cutover.RunWindow(ctx) }
func (Cutover) Prune(context.Context, string) error          { return nil }

// Sockets reports Listening and, whatever names are asked for, Procs.
type Sockets struct {
	Listening []sockets.Listener
	Procs     []sockets.Process
}

func (s Sockets) Listeners() ([]sockets.Listener, error)   { return s.Listening, nil }
func (s Sockets) FindProcesses([]string) []sockets.Process { return s.Procs }
