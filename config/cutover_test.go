package config

import (
	"strings"
	"testing"
)

// TestModuleCutover: a module's cutover is swap (the default) or overlap;
// overlap needs a container, and the exclusive volumes are Docker names.
// Each refusal names the key and the value.
func TestModuleCutover(t *testing.T) {
	for _, tc := range []struct {
		name, modules, want string
	}{
		{"default", `{name: web, ports: ["8080/tcp"], container: {name: web, image: "web:2"}}`, ""},
		{"swap", `{name: web, ports: ["8080/tcp"], cutover: swap, container: {name: web, image: "web:2"}}`, ""},
		{"overlap", `{name: web, ports: ["8080/tcp"], cutover: overlap, container: {name: web, image: "web:2", exclusive: [webdb]}}`, ""},
		{"unknown kind", `{name: web, ports: ["8080/tcp"], cutover: blue-green, container: {name: web, image: "web:2"}}`,
			`modules[0].cutover: "blue-green" is invalid: swap (the default`},
		{"overlap without a container", `{name: sshd, ports: ["22/tcp"], cutover: overlap, holders: [sshd]}`,
			`modules[0].cutover: "overlap" is invalid: overlap starts a new container beside its predecessor, and module sshd has no container`},
		{"bad exclusive volume", `{name: web, ports: ["8080/tcp"], cutover: overlap, container: {name: web, image: "web:2", exclusive: ["../data"]}}`,
			`modules[0].container.exclusive[0]: "../data" is invalid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(write(t, "node: {name: n1}\nmodules:\n  - "+tc.modules+"\n"))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if m := c.Modules[0]; tc.name == "overlap" && (m.Cutover != CutoverOverlap || len(m.Container.Exclusive) != 1) {
					t.Fatalf("loaded %+v", m)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}
