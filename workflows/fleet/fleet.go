// The Fleet: every node's NodeMigration as a child, one after another, the
// control node first. Its input names the nodes; each node's plan is read
// from the node's own agent when the node starts. It continues as new by
// history length, so a thousand nodes fit.
package fleet

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"adoption/config"
	"adoption/intent"
	"adoption/workflows"
)

// Names of the fleet on the wire.
const (
	FleetWorkflow = "Fleet"
	// SignalFleetNext lets the operator start the next node before the
	// current one has migrated every module.
	SignalFleetNext = "fleet-next"
	// SignalFleetRetry starts a node whose workflow failed, was terminated
	// or could not start, again, with its plan read afresh.
	SignalFleetRetry = "fleet-retry"
	QueryFleet       = "fleet"
	// UpdateFleetNext and UpdateFleetRetry are the same two requests as
	// Updates: the fleet's validator refuses what it would turn away or
	// what would change nothing, and the answer says what it did. The
	// signals stay for the stock temporal CLI and recorded histories.
	UpdateFleetNext  = "fleet-next"
	UpdateFleetRetry = "fleet-retry"
	// UpdateFleetPause stops the fleet starting nodes (the nodes started
	// go on); UpdateFleetResume lets it start them again. Updates only.
	UpdateFleetPause  = "fleet-pause"
	UpdateFleetResume = "fleet-resume"
	// UpdateFleetMigrate migrates a module on the nodes that declare it,
	// UpdateFleetFlip flips every migrated node: wave by wave, each within
	// its wave's budget (fleet_ops.go). Updates only.
	UpdateFleetMigrate = "fleet-migrate"
	UpdateFleetFlip    = "fleet-flip"
)

// fleetHistoryLimit is the history length at which a fleet continues as
// new (well below the server's 50k-event warning: a fleet of a thousand
// nodes takes about twenty events per node).
const fleetHistoryLimit = 10000

// maxFleetEvents bounds the fleet's event lines carried in its state.
const maxFleetEvents = 50

// FleetMember is one node of a fleet: its name and role only.
type FleetMember struct {
	Node string `json:"node"`
	Role string `json:"role"`
}

// FleetRequest is the payload of the operator's fleet requests: the node
// for a retry, none for next. NotAfter, when set, is the moment the sender
// stops waiting: an Update that reaches the fleet later is refused (Late),
// so a request the CLI reported as not answered never runs.
type FleetRequest struct {
	Node     string    `json:"node"`
	NotAfter time.Time `json:"not_after,omitzero"`
	// Intent is the operator's signed request (next: for the nodes it
	// lets start; retry: for the node; migrate, flip: for the nodes it
	// names): one intent naming every node, as a CLI before Intents sent
	// it, and still sent on to each node as it is.
	Intent *intent.Signed `json:"intent,omitempty"`
	// Intents are the same request signed for each node apart, by node
	// (intent.Each): each node is sent its own alone, so that what goes to
	// a node does not grow with the fleet (docs/access.md).
	Intents map[string]*intent.Signed `json:"intents,omitempty"`
	// Module and Nodes are a fleet migrate's: the module, and the nodes
	// whose configuration declares it (the CLI reads the fleet file).
	Module string   `json:"module,omitempty"`
	Nodes  []string `json:"nodes,omitempty"`
}

// FleetRetry is the payload of SignalFleetRetry and UpdateFleetRetry.
type FleetRetry = FleetRequest

// FleetAnswer is what the fleet did with a request it took: the node it
// lets start now (next) or will start again (retry), and the nodes it
// passed over (next).
type FleetAnswer struct {
	Node       string   `json:"node,omitempty"`
	PassedOver []string `json:"passed_over,omitempty"`
	// Targets are the nodes a fleet migrate or flip goes to, in waves;
	// Skipped those of its nodes it leaves, with why.
	Targets []string `json:"targets,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
}

// FleetID is the one fleet execution of a given name.
func FleetID(name string) string { return config.FleetWorkflowID(name) }

// FleetInput names the fleet's nodes, the control node first.
type FleetInput struct {
	Name    string        `json:"name"`
	Members []FleetMember `json:"members,omitempty"`
	// Nodes is how fleets were started before members: every plan inline.
	// Still accepted (the plans are used, not re-read), never carried on.
	Nodes []config.Plan `json:"nodes,omitempty"`
	// Resume is the state carried across continue-as-new.
	Resume *FleetState `json:"resume,omitempty"`
	// Retries are `adopt fleet retry` not yet served, carried.
	Retries []string `json:"retries,omitempty"`
	// HistoryLimit overrides fleetHistoryLimit (tests).
	HistoryLimit int `json:"history_limit,omitempty"`
	// AskFirst overrides how long the fleet waits before its first ask
	// round (an hour): the fleet file's ask_after (config.CheckAskAfter).
	AskFirst time.Duration `json:"ask_first,omitempty"`
	// Intent is the operator's signed fleet start (or the latest fleet
	// next) from an older CLI: one intent naming every node and its plan
	// hash, which each node the fleet starts adopts under.
	Intent *intent.Signed `json:"intent,omitempty"`
	// Intents are the same signed for each node apart, by node (the CLI's
	// now): a node starts under its own, which is then dropped, so the
	// map holds only the nodes not yet started.
	Intents map[string]*intent.Signed `json:"intents,omitempty"`
	// NodeIntents are the signed `adopt fleet retry NODE` not yet spent
	// on a start, by node: a retried node starts under its own.
	NodeIntents map[string]*intent.Signed `json:"node_intents,omitempty"`
	// Waves are the fleet file's waves resolved (config.ResolveWaves):
	// nil, one node at a time. A later run carries them in Resume.
	Waves *config.Waves `json:"waves,omitempty"`
}

// members is the fleet's node list, from Members, the state carried
// (a later run's input names them only there) or the inline plans of Nodes.
func (in FleetInput) members() []FleetMember {
	if len(in.Members) > 0 {
		return in.Members
	}
	if in.Resume != nil && len(in.Nodes) == 0 {
		out := make([]FleetMember, 0, len(in.Resume.Nodes))
		for _, n := range in.Resume.Nodes {
			out = append(out, FleetMember{Node: n.Node, Role: n.Role})
		}
		return out
	}
	out := make([]FleetMember, 0, len(in.Nodes))
	for _, p := range in.Nodes {
		out = append(out, FleetMember{Node: p.Node, Role: p.Role})
	}
	return out
}

// FleetNode is one node as the fleet sees it.
type FleetNode struct {
	workflows.NodeProgress
	Role    string `json:"role"`
	Started bool   `json:"started"`
	Done    bool   `json:"done"` // adopted with every module migrated (or further)
	// Ended is how the node's workflow ended, once it has: converged,
	// released, failed: ..., terminated, canceled, timed out, or not
	// started: ... (its plan or its start refused).
	Ended string `json:"ended,omitempty"`
	// RunID is the run the fleet started (carried across continue-as-new,
	// so a later run asks that run, not whatever runs under the ID now).
	RunID string `json:"run_id,omitempty"`
	// Declares are the modules of the plan the node started with.
	Declares []string `json:"declares,omitempty"`
	// PassedOver is set when the operator went on without the node
	// (`adopt fleet next`) while its end held the fleet: it holds no more,
	// and counts as ended, until `adopt fleet retry NODE` starts it again.
	PassedOver bool `json:"passed_over,omitempty"`
}

// blocked says whether a node ended badly: failed, terminated or not
// started; a converged or released node did not (releasing it is the
// operator's choice). Such a node can be retried.
func (n FleetNode) blocked() bool {
	return n.Ended != "" && n.Ended != string(workflows.PhaseConverged) && n.Ended != string(workflows.PhaseReleased)
}

// holds says whether a node's end holds the fleet: it ended badly and the
// operator has neither retried it nor gone on without it.
func (n FleetNode) holds() bool { return n.blocked() && !n.PassedOver }

// Shown is the node's phase as status shows it.
func (n FleetNode) Shown() string {
	switch {
	case !n.Started:
		return "waiting"
	case n.Ended != "" && n.PassedOver:
		return n.Ended + " (passed over)"
	case n.Ended != "":
		return n.Ended
	}
	return string(n.Phase)
}

// FleetState is what the fleet query returns.
type FleetState struct {
	Name  string      `json:"name"`
	Nodes []FleetNode `json:"nodes"`
	// NodesFrom and NodesTotal are set in a status query's answer, which
	// holds a page of the nodes (FleetPage): Nodes are the fleet's from
	// NodesFrom, of NodesTotal in all.
	NodesFrom  int `json:"nodes_from,omitempty"`
	NodesTotal int `json:"nodes_total,omitempty"`
	// Frozen is set while the control node migrates: the predecessor's
	// build pipeline and coordinator run there, so every node it manages
	// receives no update until the control node is migrated.
	Frozen string   `json:"frozen,omitempty"`
	Events []string `json:"events"`
	// Next is the index of the next node to start.
	Next int `json:"next"`
	// Grants are `adopt fleet next` not yet spent.
	Grants int `json:"grants,omitempty"`
	// Held says why the next node does not start, when a node's end holds
	// the fleet.
	Held string `json:"held,omitempty"`
	Runs int    `json:"runs,omitempty"` // continue-as-new generations
	// Waves are the fleet's waves after its control node (fleet_waves.go);
	// nil: one node at a time.
	Waves *config.Waves `json:"waves,omitempty"`
	// Paused says since when and why the fleet starts no node
	// (`adopt fleet pause`), until `adopt fleet resume`; "" when it goes on.
	Paused string `json:"paused,omitempty"`
	// Op is the latest fleet migrate or flip (fleet_ops.go), nil if none.
	Op *FleetOp `json:"op,omitempty"`
	// Following are earlier fleet migrates (of other modules) that still
	// follow the waves, besides Op (fleet_follow.go).
	Following []*FleetOp `json:"following,omitempty"`
	// AskedAt is when the last ask round's query answered (fleet_ask.go):
	// the next round lists the closes since then (less visibilityLag).
	AskedAt time.Time `json:"asked_at,omitzero"`
}

// ValidateFleet checks the fleet's order: one control node, first; names
// unique and valid.
func ValidateFleet(in FleetInput) error {
	var problems []string
	if !config.ValidName(in.Name) {
		problems = append(problems, fmt.Sprintf("fleet name %q is invalid: it must be %s", in.Name, config.NameRule))
	}
	members := in.members()
	if len(members) == 0 {
		problems = append(problems, "the fleet has no nodes")
	}
	if len(members) > MaxFleetNodes {
		problems = append(problems, fmt.Sprintf("the fleet has %d nodes, more than the %d it is built for (docs/fleet.md, bounded by design): split it into fleets of at most %d", len(members), MaxFleetNodes, MaxFleetNodes))
	}
	seen := map[string]bool{}
	controls := 0
	for i, p := range members {
		if !config.ValidName(p.Node) {
			problems = append(problems, fmt.Sprintf("node name %q is invalid: it must be %s", p.Node, config.NameRule))
		}
		if p.Role != "control" && p.Role != "member" {
			problems = append(problems, fmt.Sprintf("node %s: role %q is neither control nor member", p.Node, p.Role))
		}
		if seen[p.Node] {
			problems = append(problems, fmt.Sprintf("node %s appears twice", p.Node))
		}
		seen[p.Node] = true
		if p.Role == "control" {
			controls++
			if i != 0 {
				problems = append(problems, fmt.Sprintf("control node %s must come first (it is number %d)", p.Node, i+1))
			}
		}
	}
	if in.Waves != nil {
		if err := config.CheckWaves(*in.Waves, len(members)-1); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if in.AskFirst != 0 {
		if err := config.CheckAskAfter(in.AskFirst); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if controls != 1 {
		problems = append(problems, fmt.Sprintf("a fleet has exactly one control node (node.role: control); this one has %d", controls))
	}
	if len(problems) > 0 {
		return fmt.Errorf("fleet %s: %s", in.Name, strings.Join(problems, "; "))
	}
	return nil
}

func nodeDone(p workflows.NodeProgress) bool {
	switch p.Phase {
	case workflows.PhaseAdopted, workflows.PhaseFlipping, workflows.PhaseConverged:
		return p.Migrated == p.Modules
	}
	return false
}

// detailsLines bounds the node lines of the fleet's details: the rest are
// counted ("and N more"); `adopt fleet status` lists every node.
const detailsLines = 40

// detailsOrder is the order of the details' counts, by standing.
var detailsOrder = []string{"waiting", "probing", "adopted", "migrating", "flipping", "done", "converged", "released", "ended badly", "passed over"}

// counted is how the details count a node: waiting, its phase while it
// runs (done once adopted with every module migrated), converged or
// released, or ended badly (passed over).
func (n FleetNode) counted() string {
	switch {
	case !n.Started:
		return "waiting"
	case n.blocked() && n.PassedOver:
		return "passed over"
	case n.blocked():
		return "ended badly"
	case n.Ended != "":
		return n.Ended
	case n.Done:
		return "done"
	}
	return string(n.Phase)
}

// fleetDetails is the fleet's current details (the Web UI): what holds it,
// the count of nodes by standing, and a line for each node that is not
// done, waiting or ended well (those that ended badly first), at most
// detailsLines. Its size is bounded whatever the fleet's: the details are
// set on every workflow task.
func fleetDetails(st *FleetState) string {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**Fleet %s**\n\n", st.Name))
	if st.Frozen != "" {
		b.WriteString("> " + st.Frozen + "\n\n")
	}
	if st.Held != "" {
		b.WriteString("> **Held:** " + st.Held + "\n\n")
	}
	if st.Paused != "" {
		b.WriteString("> **Paused:** " + st.Paused + "\n\n")
	}
	for _, op := range st.ops() {
		b.WriteString("> **" + op.What() + ":** " + op.Standing() + "\n\n")
	}
	count := map[string]int{}
	var bad, running []int
	for i, n := range st.Nodes {
		k := n.counted()
		count[k]++
		switch {
		case k == "ended badly" || k == "passed over":
			bad = append(bad, i)
		case n.Started && n.Ended == "" && !n.Done:
			running = append(running, i)
		}
	}
	b.WriteString(fmt.Sprintf("**%d nodes:** ", len(st.Nodes)))
	sep := ""
	for _, k := range detailsOrder {
		if count[k] > 0 {
			b.WriteString(fmt.Sprintf("%s%d %s", sep, count[k], k))
			sep = ", "
		}
	}
	b.WriteString("\n\n")
	var num []byte
	lines := append(bad, running...)
	for _, i := range lines[:min(len(lines), detailsLines)] {
		n := st.Nodes[i]
		b.WriteString("- ")
		b.WriteString(n.Node)
		b.WriteString(" (")
		b.WriteString(n.Role)
		b.WriteString("): ")
		b.WriteString(n.Shown())
		b.WriteString(", modules ")
		num = strconv.AppendInt(num[:0], int64(n.Migrated), 10)
		num = append(num, '/')
		num = strconv.AppendInt(num, int64(n.Modules), 10)
		num = append(num, '\n')
		b.Write(num)
	}
	if more := len(lines) - detailsLines; more > 0 {
		b.WriteString(fmt.Sprintf("- and %d more (adopt fleet status --fleet FILE lists every node)\n", more))
	}
	return b.String()
}
