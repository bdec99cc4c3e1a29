// What keeps the fleet's payloads inside Temporal's limits whatever its
// size (docs/fleet.md, "Bounded by design"): a state of many nodes travels
// (continue-as-new input, result, query answer) with its per-node records
// packed, the status query answers a page of nodes at a time, a list of
// names in an event or a reason names a few and counts the rest, and a
// wave's requests go out in batches (fleet_ops.go).
package fleet

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Temporal's limits that a fleet's payloads and pending work must stay
// under (the server's defaults: limit.blobSize.error, the pending
// activities limit).
const (
	PayloadLimit           = 2 << 20
	PendingActivitiesLimit = 2000
)

// MaxFleetNodes is the largest fleet this design is sized and tested for
// (TestFleetBoundsAt50000); a fleet file with more nodes is refused.
const MaxFleetNodes = 50000

// packFrom is the size from which a state's nodes (and an op's) travel
// packed: a smaller fleet's payloads stay as they were, readable by an
// older build.
const packFrom = 1000

// runIDKept is how much of a node's run ID a packed state keeps: the
// first 16 hex digits, 64 bits, tell the chain the fleet started from
// another one as surely as the whole ID (relay.standing compares by
// prefix), and they halve the packed state.
const runIDKept = 18 // with the dash after the eighth digit

// statusPage is how many nodes the status query answers at most.
const statusPage = 1000

// listed bounds the names a line (an event, a halt, a hold) lists; the
// rest are counted.
const listed = 20

// names joins at most listed names, then says how many more.
func names(list []string, sep string) string {
	if len(list) <= listed {
		return strings.Join(list, sep)
	}
	return strings.Join(list[:listed], sep) + fmt.Sprintf("%sand %d more", sep, len(list)-listed)
}

// pack is v as JSON, gzipped.
func pack(v any) ([]byte, error) {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// unpack reads what pack wrote into v.
func unpack(b []byte, v any) error {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// fleetStateFields is FleetState without its methods (no recursion).
type fleetStateFields FleetState

// packedState is FleetState on the wire: Nodes, or, from packFrom nodes,
// NodesPacked.
type packedState struct {
	fleetStateFields
	NodesPacked []byte `json:"nodes_packed,omitempty"`
}

// MarshalJSON packs the nodes of a state of packFrom nodes or more, with
// their run IDs cut to runIDKept.
func (st FleetState) MarshalJSON() ([]byte, error) {
	out := packedState{fleetStateFields: fleetStateFields(st)}
	if len(st.Nodes) >= packFrom {
		nodes := make([]FleetNode, len(st.Nodes))
		copy(nodes, st.Nodes)
		for i := range nodes {
			nodes[i].RunID = nodes[i].RunID[:min(len(nodes[i].RunID), runIDKept)]
		}
		b, err := pack(nodes)
		if err != nil {
			return nil, fmt.Errorf("packing the fleet's %d nodes: %w", len(st.Nodes), err)
		}
		out.Nodes, out.NodesPacked = nil, b
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads either form.
func (st *FleetState) UnmarshalJSON(b []byte) error {
	var in packedState
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*st = FleetState(in.fleetStateFields)
	if in.NodesPacked != nil {
		if err := unpack(in.NodesPacked, &st.Nodes); err != nil {
			return fmt.Errorf("unpacking the fleet's nodes: %w", err)
		}
	}
	return nil
}

// fleetOpFields is FleetOp without its methods.
type fleetOpFields FleetOp

// packedOp is FleetOp on the wire: Nodes, or, from packFrom targets,
// NodesPacked.
type packedOp struct {
	fleetOpFields
	NodesPacked []byte `json:"nodes_packed,omitempty"`
}

// MarshalJSON packs the targets of an op of packFrom targets or more.
func (op FleetOp) MarshalJSON() ([]byte, error) {
	out := packedOp{fleetOpFields: fleetOpFields(op)}
	if len(op.Nodes) >= packFrom {
		b, err := pack(op.Nodes)
		if err != nil {
			return nil, fmt.Errorf("packing the op's %d nodes: %w", len(op.Nodes), err)
		}
		out.Nodes, out.NodesPacked = nil, b
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads either form.
func (op *FleetOp) UnmarshalJSON(b []byte) error {
	var in packedOp
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*op = FleetOp(in.fleetOpFields)
	if in.NodesPacked != nil {
		if err := unpack(in.NodesPacked, &op.Nodes); err != nil {
			return fmt.Errorf("unpacking the op's nodes: %w", err)
		}
	}
	return nil
}

// FleetPage is the status query's argument: the nodes from From, Count of
// them (0, or more than statusPage: statusPage). A query without one (an
// older CLI, the Web UI) gets the first page.
type FleetPage struct {
	From  int `json:"from,omitempty"`
	Count int `json:"count,omitempty"`
}

// page is what the status query answers for p: st without the op's signed
// intents, with the nodes of the page (and the op's targets among them).
func (st *FleetState) page(p FleetPage) FleetState {
	out := *st
	count := p.Count
	if count <= 0 || count > statusPage {
		count = statusPage
	}
	from := min(max(p.From, 0), len(st.Nodes))
	to := min(from+count, len(st.Nodes))
	out.Nodes, out.NodesFrom, out.NodesTotal = st.Nodes[from:to], from, len(st.Nodes)
	var in map[string]bool // the page's nodes, when it is not every node
	if from > 0 || to < len(st.Nodes) {
		in = make(map[string]bool, to-from)
		for _, n := range out.Nodes {
			in[n.Node] = true
		}
	}
	if st.Op != nil {
		out.Op = st.Op.page(in)
	}
	out.Following = nil
	for _, op := range st.Following {
		out.Following = append(out.Following, op.page(in))
	}
	return out
}

// page is op as a status page shows it: without its signed intents, its
// counts whole, its targets those of in (nil: all).
func (op *FleetOp) page(in map[string]bool) *FleetOp {
	out := *op
	out.Intent, out.Intents, out.pos = nil, nil, nil
	out.Total, out.Served, out.Failed = op.counts()
	if in != nil {
		out.Nodes = nil
		for _, n := range op.Nodes {
			if in[n.Node] {
				out.Nodes = append(out.Nodes, n)
			}
		}
	}
	return &out
}
