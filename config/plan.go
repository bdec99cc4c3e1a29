package config

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"adoption/keyfile"
)

// Plan is the node's slice of the configuration as the workflow records it.
// It travels through Temporal's history, so it carries no file content and
// no environment value: each is named by a digest, keyed by the codec key
// when one is configured (codeckey.go).
type Plan struct {
	Node            string      `json:"node"`
	Role            string      `json:"role"`
	ManagementPorts []Port      `json:"management_ports"`
	Foundation      []NamedPort `json:"foundation"`
	// FoundationContainers are what genesis raises on the control node
	// (foundation.containers): new containers, environment by digest.
	FoundationContainers []Container  `json:"foundation_containers,omitempty"`
	Modules              []ModulePlan `json:"modules"`
	NodeFiles            []FilePlan   `json:"node_files"`
	Control              []string     `json:"control"`
	Drop                 []Port       `json:"drop"`
	Widen                []Port       `json:"widen,omitempty"`
	// DropClasses and WidenClasses are the traffic classes flip.drop and
	// flip.widen name, as class spellings (firewall.Class.Spelling).
	DropClasses  []string `json:"drop_classes,omitempty"`
	WidenClasses []string `json:"widen_classes,omitempty"`
	// Witness is flip.witness: where the orchestrator confirms a flip from.
	Witness           *Witness      `json:"witness,omitempty"`
	ConfirmTimeout    time.Duration `json:"confirm_timeout"`
	ReconcileInterval time.Duration `json:"reconcile_interval"`
	DriftInterval     time.Duration `json:"drift_interval"`
	StopTimeout       time.Duration `json:"stop_timeout"`
	// Digests is the kind of every digest of a value in the plan (files'
	// sha256, containers' env_sha256; the JSON names predate keyed
	// digests): DigestHMAC with a codec key, else DigestSHA256. Absent in
	// plans recorded before it existed, which means DigestSHA256.
	Digests string `json:"digests,omitempty"`
}

// DigestKind is the kind of the plan's digests, DigestSHA256 when unsaid.
func (p Plan) DigestKind() string {
	if p.Digests == "" {
		return DigestSHA256
	}
	return p.Digests
}

type NamedPort struct {
	Name string `json:"name"`
	Port Port   `json:"port"`
}

type ModulePlan struct {
	Name      string     `json:"name"`
	Ports     []Port     `json:"ports"`
	Container *Container `json:"container,omitempty"`
	Files     []FilePlan `json:"files,omitempty"`
	Health    *Health    `json:"health,omitempty"`
	// Holders: a host service's own executables (Module.Holders).
	Holders []string `json:"holders,omitempty"`
	// Cutover: Module.Cutover ("" for the swap).
	Cutover string `json:"cutover,omitempty"`
	// ReplacesUnit: the predecessor's system unit (Module.ReplacesUnit).
	ReplacesUnit string `json:"replaces_unit,omitempty"`
	// ReplacesExe: the predecessor's executable (Module.ReplacesExe).
	ReplacesExe string `json:"replaces_exe,omitempty"`
}

type FilePlan struct {
	Path string `json:"path"`
	// SHA256 is the digest (of Plan.Digests' kind) of the mesh's content;
	// the content stays on the operator's side and in the node's file.
	SHA256 string `json:"sha256"`
	Mode   string `json:"mode,omitempty"`
	// Keep and Format are key names and a syntax name, never values.
	Keep   []string `json:"keep,omitempty"`
	Format string   `json:"format,omitempty"`
}

// MergeFormat is the syntax a per-key merge reads this file in: the
// configured one, else the one its path implies; "" means replace it whole.
func (f FilePlan) MergeFormat() keyfile.Format {
	if f.Format != "" {
		return keyfile.Format(f.Format)
	}
	if len(f.Keep) > 0 {
		return keyfile.Infer(f.Path)
	}
	return ""
}

// Plan derives the node's plan. Call it only on a validated Config.
func (c *Config) Plan() Plan {
	d := c.Temporal.digester()
	p := Plan{
		Digests:           d.kind(),
		Node:              c.Node.Name,
		Role:              c.Node.Role,
		ManagementPorts:   MustPorts(c.Node.ManagementPorts),
		Control:           append([]string(nil), c.Predecessor.Control...),
		ConfirmTimeout:    c.Flip.ConfirmTimeout,
		ReconcileInterval: c.Firewall.ReconcileInterval,
		DriftInterval:     c.Drift.Interval,
		StopTimeout:       c.Cutover.StopTimeout,
		NodeFiles:         filePlans(d, c.NodeFiles),
	}
	if w := c.Flip.Witness; w.Address != "" || w.From != "" || w.Netns != "" || w.Disabled || len(w.Key) > 0 {
		w := c.Flip.Witness
		p.Witness = &w
	}
	p.Drop, p.DropClasses = declared(c.Flip.Drop)
	p.Widen, p.WidenClasses = declared(c.Flip.Widen)
	for _, name := range sortedKeys(c.Foundation.Ports) {
		p.Foundation = append(p.Foundation, NamedPort{Name: name, Port: MustPorts([]string{c.Foundation.Ports[name]})[0]})
	}
	for _, ct := range c.Foundation.Containers {
		p.FoundationContainers = append(p.FoundationContainers, *containerPlan(d, &ct))
	}
	for _, m := range c.Modules {
		p.Modules = append(p.Modules, ModulePlan{
			Name: m.Name, Ports: MustPorts(m.Ports), Container: containerPlan(d, m.Container),
			Files: filePlans(d, m.Files), Health: m.Health, Holders: append([]string(nil), m.Holders...), Cutover: m.Cutover,
			ReplacesUnit: m.ReplacesUnit, ReplacesExe: m.ReplacesExe,
		})
	}
	return p
}

// OverlayPort is the foundation port (foundation.ports.overlay) of the
// private network: every node binds it when it is placed on the overlay.
const OverlayPort = "overlay"

// Placement lists the foundation ports this node binds when it is placed
// on the overlay: the control node binds every foundation port at genesis,
// a member only the overlay's.
func (p Plan) Placement() []NamedPort {
	if p.Role == "control" {
		return p.Foundation
	}
	var out []NamedPort
	for _, fp := range p.Foundation {
		if fp.Name == OverlayPort {
			out = append(out, fp)
		}
	}
	return out
}

// PipelineFreeze states what adopting a control node costs: the
// predecessor's build pipeline and coordinator run there, so stopping its
// control freezes their updates for every node they manage. "" for a
// member.
func PipelineFreeze(role, node string) string {
	if role != "control" {
		return ""
	}
	return fmt.Sprintf("the predecessor's pipeline is frozen for every node it manages while control node %s migrates", node)
}

// DeclaredPaths lists every path the plan declares, sorted, each once.
func (p Plan) DeclaredPaths() []string {
	seen := map[string]bool{}
	for _, f := range p.NodeFiles {
		seen[f.Path] = true
	}
	for _, m := range p.Modules {
		for _, f := range m.Files {
			seen[f.Path] = true
		}
	}
	return sortedKeys(seen)
}

// Module returns the named module's plan.
func (p Plan) Module(name string) (ModulePlan, bool) {
	for _, m := range p.Modules {
		if m.Name == name {
			return m, true
		}
	}
	return ModulePlan{}, false
}

// containerPlan is the module's container as the plan carries it: the
// environment overrides by name and digest only.
func containerPlan(d digester, c *Container) *Container {
	if c == nil {
		return nil
	}
	cp := *c
	cp.Env, cp.EnvSHA256 = nil, nil
	for _, kv := range c.Env {
		name, v, _ := strings.Cut(kv, "=")
		if cp.EnvSHA256 == nil {
			cp.EnvSHA256 = map[string]string{}
		}
		cp.EnvSHA256[name] = d.sum([]byte(v))
	}
	return &cp
}

// KeyValues splits KEY=VALUE entries (validated) into a map.
func KeyValues(kvs []string) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

func filePlans(d digester, fs []File) []FilePlan {
	out := make([]FilePlan, 0, len(fs))
	for _, f := range fs {
		out = append(out, FilePlan{Path: f.Path, SHA256: d.sum([]byte(f.Content)), Mode: f.Mode,
			Keep: append([]string(nil), f.Keep...), Format: f.Format})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Contents maps the digest (the plan's kind) of every declared file's
// content and every environment override to the value. It stays on the
// node: the worker looks up by the digest the plan carries, so the bytes
// never travel through Temporal, and a node whose local configuration is
// stale is found out (the digest is missing).
func (c *Config) Contents() map[string][]byte {
	d := c.Temporal.digester()
	out := map[string][]byte{}
	add := func(fs []File) {
		for _, f := range fs {
			out[d.sum([]byte(f.Content))] = []byte(f.Content)
		}
	}
	add(c.NodeFiles)
	env := func(ct *Container) {
		// Environment overrides are looked up the same way.
		for _, kv := range ct.Env {
			_, v, _ := strings.Cut(kv, "=")
			out[d.sum([]byte(v))] = []byte(v)
		}
	}
	for i := range c.Foundation.Containers {
		env(&c.Foundation.Containers[i])
	}
	for _, m := range c.Modules {
		add(m.Files)
		if m.Container != nil {
			env(m.Container)
		}
	}
	return out
}

// ExePrefix names a host predecessor that is an executable, not a unit.
const ExePrefix = "exe:"

// HostPredecessor is the predecessor on the node itself the module's
// container takes over: its unit (replaces_unit), or ExePrefix and its
// executable (replaces_exe); "" for none.
func (m ModulePlan) HostPredecessor() string {
	switch {
	case m.ReplacesUnit != "":
		return m.ReplacesUnit
	case m.ReplacesExe != "":
		return ExePrefix + m.ReplacesExe
	}
	return ""
}

// HostPredecessorKey is the key that names it, for an error.
func (m ModulePlan) HostPredecessorKey() string {
	if m.ReplacesExe != "" && m.ReplacesUnit == "" {
		return fmt.Sprintf("modules[%s].replaces_exe", m.Name)
	}
	return fmt.Sprintf("modules[%s].replaces_unit", m.Name)
}

// HostPredecessorSetting is the key and the value as the operator wrote
// them, for an error.
func (m ModulePlan) HostPredecessorSetting() string {
	v := m.ReplacesUnit
	if v == "" {
		v = m.ReplacesExe
	}
	return fmt.Sprintf("%s = %q", m.HostPredecessorKey(), v)
}
