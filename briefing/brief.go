// Package briefing writes a node's briefing: what an operator reads before
// `adopt start`, and again before the flip. It is built from what the node
// reported (the probe) and what the workflow recorded (its state), never from
// a file's content: the briefing names files, keys and hashes, no values.
//
// Build gathers the facts and the risks into a Brief; markdown.go and html.go
// render the same Brief, so the two forms never say different things.
package briefing

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/firewall"
	"adoption/timefmt"
	"adoption/workflows"
)

// Brief is a node's briefing, ready to render.
type Brief struct {
	Node      string
	Role      string
	Phase     string // "not started" before adopt start
	Generated time.Time
	Source    string // where the facts come from: the workflow or a local probe
	// Local shows Generated in the host's zone (--local), else in UTC.
	Local bool `json:"-"`

	FirewallKind  string
	FirewallNote  string // unsupported or unreadable, when so
	Tables        []Table
	Open          []Open
	Containers    []Container
	EngineNote    string
	Files         []File
	Foundation    []Foundation
	GenesisState  string
	Frozen        string // the predecessor's pipeline freeze, on the control node
	Modules       []Module
	Fates         []Fate
	PreviewState  string // approved, refused (with reasons) or none yet
	PreviewWhy    []string
	NodeFiles     []string // each node file's fates at the flip, values masked
	Drift         []string
	Risks         []string
	ControlActive []string
}

type Table struct{ Family, Name, Owner, Chains string }

type Open struct {
	Port, Family, Direction, From, Holder string
	Uncertain                             bool
}

type Container struct {
	Name, Image, State, Ports string
	Mounts                    []string
}

type File struct {
	Path, State, Mode, Owner, Hash, Module string
	Keep                                   []string
}

type Foundation struct{ Name, Port, Holder string }

type Module struct {
	Name, State, Predecessor, Ports, LastError string
	Files                                      []string
	Conflicts                                  []string
}

type Fate struct{ Port, Family, Direction, Fate, By string }

// Build gathers the brief. probe and state may each be nil: before adopt
// start there is only a local probe; a running workflow has both.
func Build(plan config.Plan, probe *nodewire.ProbeReport, state *workflows.State, now time.Time) Brief {
	b := Brief{Node: plan.Node, Role: plan.Role, Phase: "not started", Generated: now.UTC(), Source: "a probe on the node"}
	if state != nil {
		b.Phase = string(state.Phase)
		b.Source = "the node's workflow"
		if probe == nil {
			probe = state.Probe
		}
	}
	owners := moduleOfPath(plan)
	var listeners []holderAt
	if probe != nil {
		b.FirewallKind = probe.Firewall.Kind
		b.FirewallNote = firstNonEmpty(probe.Firewall.Unsupported, probe.Firewall.Error)
		for _, t := range probe.Firewall.Tables {
			var chains []string
			for _, c := range t.Chains {
				s := fmt.Sprintf("%s (%d rules", c.Name, c.Rules)
				if c.Hook != "" {
					s += ", hook " + c.Hook
					if c.Policy != "" {
						s += " policy " + c.Policy
					}
				}
				// A chain owned otherwise than its table (Docker's chains
				// in iptables-nft's shared filter table) says whose it is,
				// as the probe says it.
				if c.Ownership != t.Ownership {
					s += ", " + c.Ownership.Text()
				}
				chains = append(chains, s+")")
			}
			b.Tables = append(b.Tables, Table{Family: t.Family, Name: t.Name, Owner: t.Ownership.Text(), Chains: strings.Join(chains, ", ")})
		}
		for _, l := range probe.Sockets {
			listeners = append(listeners, holderAt{proto: l.Proto, port: l.Port, holder: l.Holder()})
		}
		for _, o := range probe.Firewall.Open {
			b.Open = append(b.Open, Open{Port: portText(o), Family: o.Family, Direction: o.Direction, From: o.From,
				Uncertain: o.Uncertain, Holder: holderOf(listeners, o)})
		}
		if !probe.Containers.Available {
			b.EngineNote = firstNonEmpty(probe.Containers.Error, "the container engine could not be reached")
		}
		for _, c := range probe.Containers.Containers {
			var ports []string
			for _, p := range c.Ports {
				ports = append(ports, fmt.Sprint(p))
			}
			var mounts []string
			for _, m := range c.Mounts {
				src := m.Source
				if m.Type == "volume" && m.Name != "" {
					src = m.Name
				}
				mounts = append(mounts, fmt.Sprintf("%s %s → %s", m.Type, src, m.Destination))
			}
			b.Containers = append(b.Containers, Container{Name: c.Name, Image: c.Image, State: c.State, Ports: strings.Join(ports, ", "), Mounts: mounts})
		}
		for _, p := range probe.Control {
			b.ControlActive = append(b.ControlActive, fmt.Sprintf("%s (pid %d)", p.Exe, p.PID))
		}
	}

	// Files: custody's record when the workflow has one, else the probe's
	// look; a hash is shortened, never a value.
	seen := map[string]bool{}
	if state != nil {
		for _, r := range state.Custody {
			seen[r.Path] = true
			st := "in custody (absent when found)"
			if r.Found {
				st = "in custody"
			}
			b.Files = append(b.Files, fileOf(r.Path, st, r.Mode, r.UID, r.GID, r.SHA256, owners[r.Path]))
		}
	}
	if probe != nil {
		for _, f := range probe.Files {
			if seen[f.Path] {
				continue
			}
			st := "found, not yet in custody"
			switch {
			case f.Error != "":
				st = "unreadable: " + f.Error
			case !f.Exists:
				st = "absent"
			}
			b.Files = append(b.Files, fileOf(f.Path, st, f.Mode, f.UID, f.GID, f.SHA256, owners[f.Path]))
		}
	}
	sort.Slice(b.Files, func(i, j int) bool { return b.Files[i].Path < b.Files[j].Path })

	for _, fp := range plan.Foundation {
		b.Foundation = append(b.Foundation, Foundation{Name: fp.Name, Port: fp.Port.String(), Holder: holderOfPort(listeners, fp.Port)})
	}
	b.Frozen = config.PipelineFreeze(plan.Role, plan.Node)
	if state != nil {
		b.GenesisState = firstNonEmpty(state.Genesis.State, "not run")
		if state.Genesis.Error != "" {
			b.GenesisState += ": " + state.Genesis.Error
		}
	}

	for _, m := range plan.Modules {
		mod := Module{Name: m.Name, State: "pending"}
		if m.Container != nil {
			mod.Predecessor = m.Container.Name
		}
		var ports []string
		for _, p := range m.Ports {
			ports = append(ports, p.String())
		}
		mod.Ports = strings.Join(ports, ", ")
		for _, f := range m.Files {
			s := f.Path
			if len(f.Keep) > 0 {
				s += " (keeps " + strings.Join(f.Keep, ", ") + ")"
			}
			mod.Files = append(mod.Files, s)
		}
		if state != nil {
			for _, ms := range state.Modules {
				if ms.Name == m.Name {
					mod.State, mod.LastError = ms.State, ms.LastError
					for _, c := range ms.Conflicts {
						mod.Conflicts = append(mod.Conflicts, c.Path+" "+c.Key+": "+c.Why)
					}
				}
			}
		}
		b.Modules = append(b.Modules, mod)
	}

	b.PreviewState = "no preview yet: `adopt preview " + plan.Node + "` makes one"
	if state != nil && state.LastPreview != nil {
		pv := state.LastPreview
		b.PreviewState = "refused"
		if pv.Approved {
			b.PreviewState = "approved"
		}
		b.PreviewWhy = pv.Reasons
		for _, f := range pv.NodeFiles {
			b.NodeFiles = append(b.NodeFiles, f.Text())
		}
		for _, f := range pv.Fates {
			fate := f.Fate
			if f.Dropped {
				fate += " (dropped on purpose)"
			}
			if f.Declared {
				fate += " (declared in flip.widen)"
			}
			dir := f.Opening.Direction
			if f.Opening.In != "" {
				dir += " in on " + f.Opening.In // a container reaching the node
			}
			if f.Opening.Out != "" {
				dir += " out by " + f.Opening.Out // the found output chain names the interface
			}
			b.Fates = append(b.Fates, Fate{Port: portText(f.Opening), Family: f.Opening.Family, Direction: dir, Fate: fate, By: f.By})
		}
	}
	if state != nil {
		for _, d := range state.Drift {
			b.Drift = append(b.Drift, firstNonEmpty(d.Path, d.Kind)+": "+d.What)
		}
	}
	b.Risks = risks(plan, b, state)
	return b
}

// risks lists what needs an operator's decision, most dangerous first.
func risks(plan config.Plan, b Brief, state *workflows.State) []string {
	var out []string
	for _, c := range b.ControlActive {
		out = append(out, "the predecessor's control daemon "+c+" runs: adoption refuses until it is stopped")
	}
	if b.FirewallNote != "" {
		out = append(out, "the found firewall: "+b.FirewallNote)
	}
	for _, mp := range plan.ManagementPorts {
		open := false
		for _, o := range b.Open {
			if o.Direction == "input" && portCovers(o.Port, mp) {
				open = true
			}
		}
		if !open && b.FirewallKind != "" {
			out = append(out, fmt.Sprintf("management port %s is not open in the found firewall: check how you reach the node before a flip", mp))
		}
	}
	for _, fate := range b.Fates {
		if fate.By == "" && strings.HasPrefix(fate.Fate, "closing") && !strings.Contains(fate.Fate, "dropped") {
			out = append(out, fmt.Sprintf("%s %s (%s) would close at a flip: declare it in a module or list it in flip.drop", fate.Port, fate.Family, fate.Direction))
		}
	}
	for _, o := range b.Open {
		if o.Uncertain {
			out = append(out, fmt.Sprintf("%s %s (%s) is open only under conditions the evaluator cannot decide: look at the rule before the flip", o.Port, o.Family, o.Direction))
		}
	}
	for _, f := range b.Foundation {
		if f.Holder != "" && plan.Role == "control" {
			out = append(out, fmt.Sprintf("foundation port %s (%s) is held by %s: genesis will refuse; set foundation.ports.%s", f.Port, f.Name, f.Holder, f.Name))
		}
	}
	for _, m := range b.Modules {
		for _, c := range m.Conflicts {
			out = append(out, fmt.Sprintf("module %s: conflict in %s: decide with `adopt resolve %s PATH KEY --take node|mesh`", m.Name, c, plan.Node))
		}
		if m.State == workflows.ModuleFailed {
			out = append(out, fmt.Sprintf("module %s failed: %s", m.Name, firstNonEmpty(m.LastError, "see adopt status")))
		}
	}
	for _, d := range b.Drift {
		out = append(out, "drift: "+d+": undo it or `adopt drift accept "+plan.Node+"`")
	}
	if b.EngineNote != "" {
		out = append(out, "containers: "+b.EngineNote)
	}
	if state != nil {
		// A mark placed where it may not take effect, or where it lets a
		// source the found firewall denies through (firewall's placeIn).
		for _, m := range state.Marks {
			if m.Placement != "" {
				out = append(out, fmt.Sprintf("marked rule %s in %s %s %s: %s", m.Mark.Comment(), m.Family, m.Table, m.Chain, m.Placement))
			}
		}
	}
	return out
}

type holderAt struct {
	proto  string
	port   uint16
	holder string
}

func holderOf(ls []holderAt, o firewall.Opening) string {
	end := o.PortEnd
	if end == 0 {
		end = o.Port
	}
	var hs []string
	for _, l := range ls {
		if l.proto == o.Proto && l.port >= o.Port && l.port <= end {
			hs = append(hs, fmt.Sprintf("%d: %s", l.port, l.holder))
		}
	}
	if len(hs) > 3 {
		hs = append(hs[:3], fmt.Sprintf("and %d more", len(hs)-3))
	}
	return strings.Join(hs, "; ")
}

func holderOfPort(ls []holderAt, p config.Port) string {
	for _, l := range ls {
		if l.proto == p.Proto && l.port == p.Num {
			return l.holder
		}
	}
	return ""
}

func portText(o firewall.Opening) string { return firewall.PortText(o) }

// portCovers reports whether an opening's text ("22/tcp", "1000-2000/tcp")
// covers p.
func portCovers(text string, p config.Port) bool {
	nums, proto, _ := strings.Cut(text, "/")
	if proto != p.Proto {
		return false
	}
	lo, hi, isRange := strings.Cut(nums, "-")
	if !isRange {
		hi = lo
	}
	var a, z int
	fmt.Sscan(lo, &a)
	fmt.Sscan(hi, &z)
	return int(p.Num) >= a && int(p.Num) <= z
}

func fileOf(path, state, mode string, uid, gid int, sum, module string) File {
	h := ""
	if len(sum) >= 12 {
		h = sum[:12]
	}
	return File{Path: path, State: state, Mode: mode, Owner: fmt.Sprintf("%d:%d", uid, gid), Hash: h, Module: firstNonEmpty(module, "node (at the flip)")}
}

func moduleOfPath(plan config.Plan) map[string]string {
	out := map[string]string{}
	for _, m := range plan.Modules {
		for _, f := range m.Files {
			out[f.Path] = m.Name
		}
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// GeneratedAt is when the briefing was made, as every time is written
// (package timefmt).
func (b Brief) GeneratedAt() string { return timefmt.Format(b.Generated, b.Local) }
