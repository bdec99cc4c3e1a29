package cutover

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
)

// A kept variable and label keep the predecessor's value over the module's;
// the others the module sets win; a kept name the predecessor did not set
// takes the module's value. Carried names them, never a value.
func TestCarryKeepsPredecessorValues(t *testing.T) {
	pred := &container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: "0123456789abcdef", Name: "/app", HostConfig: &container.HostConfig{}},
		Config: &container.Config{Image: "app:1",
			Env:    []string{"MODE=node-canary", "LEVEL=info", "PATH=/bin"},
			Labels: map[string]string{"tier": "node", "team": "ops"}},
	}
	img := &imageDefaults{Env: []string{"PATH=/bin"}}
	spec := Spec{Name: "app", Image: "app:2",
		Env:    map[string]string{"MODE": "mesh-canary", "LEVEL": "warn", "NEW": "x"},
		Labels: map[string]string{"tier": "mesh", "team": "mesh"},
		Keep:   []string{"MODE", "tier", "NEW"}}
	m := carry(spec, pred, nil, img, img)
	env := strings.Join(m.cfg.Env, " ")
	if env != "LEVEL=warn MODE=node-canary NEW=x" {
		t.Fatalf("env: %s", env)
	}
	if m.cfg.Labels["tier"] != "node" || m.cfg.Labels["team"] != "mesh" {
		t.Fatalf("labels: %v", m.cfg.Labels)
	}
	cr := m.carried
	if strings.Join(cr.Kept, ",") != "env MODE,label tier" || strings.Join(cr.EnvSet, ",") != "LEVEL,NEW" {
		t.Fatalf("carried: %+v", cr)
	}
	for _, l := range [][]string{cr.Kept, cr.EnvSet, cr.Env, cr.Changed} {
		if strings.Contains(strings.Join(l, " "), "canary") {
			t.Fatalf("a value in what was carried: %+v", cr)
		}
	}
}
