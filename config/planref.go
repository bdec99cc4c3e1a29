package config

// This file holds PlanRef: how a request to a node's agent names the plan
// it was made under. The node derives the plan from its own file; a
// request only says which one it means, so the workflow's history holds
// the plan once (the workflow's input), not in every activity's input.

import (
	"bytes"
	"encoding/json"
)

// PlanRef names a plan: its node, its hash (Plan.Hash) and the kind of its
// digests, so that a node can refuse a request made under another plan,
// and say whether the digests' kind is what differs.
type PlanRef struct {
	Node    string `json:"node"`
	Hash    string `json:"hash"`
	Digests string `json:"digests,omitempty"`
}

// Ref is the reference a request carries for p.
func (p Plan) Ref() PlanRef {
	return PlanRef{Node: p.Node, Hash: p.Hash(), Digests: p.DigestKind()}
}

// DigestKind is the kind of the named plan's digests, DigestSHA256 when
// unsaid.
func (r PlanRef) DigestKind() string {
	if r.Digests == "" {
		return DigestSHA256
	}
	return r.Digests
}

// UnmarshalJSON reads a reference, or a whole plan as requests carried it
// before they carried references (an older orchestrator's, during an
// upgrade): that plan is named by its own hash, so the node checks it the
// same way.
func (r *PlanRef) UnmarshalJSON(b []byte) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	if _, ref := probe["hash"]; ref || bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		type plain PlanRef
		return json.Unmarshal(b, (*plain)(r))
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = p.Ref()
	return nil
}
