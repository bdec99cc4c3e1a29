// This file holds the read-only probe of the found firewall: list, name
// its kind, summarise, evaluate.

package firewall

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"adoption/netns"
)

// Inspector reads the found firewall of one network namespace. It only
// lists: nothing it does changes the ruleset.
type Inspector struct {
	Netns string // node.netns; "" for the worker's own namespace
}

// Inspect lists the ruleset, names its kind, summarises its tables and
// evaluates which ports are open. An unsupported kind is reported in
// Report.Unsupported rather than as an error, so the probe still shows it.
func (i Inspector) Inspect(ctx context.Context) (Report, error) {
	rs, err := i.Ruleset()
	if err != nil {
		return Report{}, err
	}
	legacy, err := i.legacyTables()
	if err != nil {
		return Report{}, err
	}
	r := Report{Tables: Summarise(rs), Open: []Opening{}}
	kind, err := Kind(rs, legacy)
	if err != nil {
		r.Kind = "unsupported"
		r.Unsupported = err.Error()
		return r, nil
	}
	r.Kind = kind
	r.Open = OpenPorts(rs)
	if r.Open == nil {
		r.Open = []Opening{}
	}
	return r, nil
}

// Ruleset lists the namespace's whole ruleset into the model.
func (i Inspector) Ruleset() (*Ruleset, error) {
	conn, closer, err := Dial(i.Netns)
	if err != nil {
		return nil, err
	}
	defer closer()
	return List(conn)
}

// legacyTables reads the iptables-legacy tables loaded in the namespace: a
// firewall there is invisible to nftables and must not be taken for none.
func (i Inspector) legacyTables() ([]string, error) {
	var names []string
	err := netns.Do(i.Netns, func() error {
		for _, f := range []string{"ip_tables_names", "ip6_tables_names"} {
			dir := "/proc/self/net"
			if i.Netns != "" {
				dir = "/proc/thread-self/net"
			}
			b, err := os.ReadFile(filepath.Join(dir, f))
			if os.IsNotExist(err) {
				continue // the legacy modules are not loaded: no legacy table anywhere
			}
			if err != nil {
				return err
			}
			names = append(names, strings.Fields(string(b))...)
		}
		return nil
	})
	return names, err
}

// Summarise describes every table and chain without their rules.
func Summarise(rs *Ruleset) []TableSummary {
	out := make([]TableSummary, 0, len(rs.Tables))
	for _, t := range rs.Tables {
		ts := TableSummary{Family: t.Family, Name: t.Name, Chains: []ChainSummary{}}
		for _, c := range t.Chains {
			cs := ChainSummary{Name: c.Name, Hook: c.Hook, Policy: c.Policy, Rules: len(c.Rules)}
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
