package cutover

import (
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
)

func conflictPred() *container.InspectResponse {
	return &container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: "0123456789abcdef", Name: "/app", HostConfig: &container.HostConfig{}},
		Config: &container.Config{Image: "app:1",
			Env:    []string{"MODE=node-canary", "LEVEL=info", "SAME=x"},
			Labels: map[string]string{"tier": "node-canary"}},
	}
}

// A variable and a label the predecessor was given that the module sets
// otherwise conflict, named by key and keyed digests, never by value; the
// same value, or a name the predecessor did not set, does not.
func TestCarryRaisesValueConflicts(t *testing.T) {
	img := &imageDefaults{}
	spec := Spec{Name: "app", Image: "app:2",
		Env:    map[string]string{"MODE": "mesh-canary", "SAME": "x", "NEW": "y"},
		Labels: map[string]string{"tier": "mesh-canary"}}
	m := carry(spec, conflictPred(), nil, img, img)
	e := (&Engine{}).WithDigest(func(b []byte) string { return "hmac-sha256:" + strings.Repeat("0", len(b)) })
	err := e.conflicts("app", m.clashes)
	var vc *ValueConflicts
	if !errors.As(err, &vc) || !errors.Is(err, ErrValueConflict) {
		t.Fatalf("no conflict: %v", err)
	}
	if len(vc.Conflicts) != 2 || vc.Conflicts[0].Key != "env:MODE" || vc.Conflicts[1].Key != "label:tier" {
		t.Fatalf("conflicts: %+v", vc.Conflicts)
	}
	if c := vc.Conflicts[0]; c.Node != "hmac-sha256:"+strings.Repeat("0", 11) || c.Mesh != "hmac-sha256:"+strings.Repeat("0", 11) {
		t.Fatalf("digests: %+v", c)
	}
	said := err.Error() + vc.Conflicts[0].Why() + vc.Conflicts[1].Why()
	if strings.Contains(said, "canary") || !strings.Contains(said, "env:MODE, label:tier") {
		t.Fatalf("what the refusal says: %s", said)
	}
}

// Kept, or decided for the node: the predecessor's value; decided for
// the mesh: the module's; no conflict left either way.
func TestCarrySettlesConflicts(t *testing.T) {
	img := &imageDefaults{}
	for _, tc := range []struct {
		name      string
		keep      []string
		takes     map[string]string
		env, tier string
	}{
		{"kept", []string{"MODE", "tier"}, nil, "MODE=node-canary", "node-canary"},
		{"decided node", nil, map[string]string{"env:MODE": "node", "label:tier": "node"}, "MODE=node-canary", "node-canary"},
		{"decided mesh", nil, map[string]string{"env:MODE": "mesh", "label:tier": "mesh"}, "MODE=mesh-canary", "mesh-canary"},
	} {
		spec := Spec{Name: "app", Image: "app:2", Env: map[string]string{"MODE": "mesh-canary"},
			Labels: map[string]string{"tier": "mesh-canary"}, Keep: tc.keep, Takes: tc.takes}
		if err := spec.checkTakes(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		m := carry(spec, conflictPred(), nil, img, img)
		if len(m.clashes) != 0 {
			t.Fatalf("%s: conflicts left: %v", tc.name, len(m.clashes))
		}
		if !strings.Contains(strings.Join(m.cfg.Env, " "), tc.env) || m.cfg.Labels["tier"] != tc.tier {
			t.Fatalf("%s: env %v labels %v", tc.name, m.cfg.Env, m.cfg.Labels)
		}
	}
}

// A decision that is not env:NAME or label:NAME, on a name the module
// does not set, or neither node nor mesh, is refused naming its key.
func TestTakesBadKeysNamed(t *testing.T) {
	for key, take := range map[string]string{
		"MODE":         "node",
		"env:":         "node",
		"env:BAD NAME": "node",
		"volume:data":  "mesh",
		"env:UNSET":    "node",
		"label:unset":  "mesh",
		"env:MODE":     "both",
	} {
		spec := Spec{Name: "app", Env: map[string]string{"MODE": "v"}, Takes: map[string]string{key: take}}
		err := spec.checkTakes()
		if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), key) {
			t.Fatalf("%s take %s: %v", key, take, err)
		}
	}
}
