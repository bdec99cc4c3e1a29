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

// TestModuleReplacesUnit: replaces_unit names a service unit of the
// predecessor, handed over to the module's container; anything that is
// not a plain service unit name (it reaches the service manager and a
// path), or a module without a container, is refused naming key, value and
// what to write.
func TestModuleReplacesUnit(t *testing.T) {
	for _, tc := range []struct {
		name, modules, want string
	}{
		{"unit", `{name: dns, ports: ["53/udp", "53/tcp"], replaces_unit: dnsmasq.service, container: {name: dns, image: "dns:1"}}`, ""},
		{"instance", `{name: dns, ports: ["53/udp"], replaces_unit: "resolver@lan.service", container: {name: dns, image: "dns:1"}}`, ""},
		{"a path", `{name: dns, ports: ["53/udp"], replaces_unit: "../../etc/passwd.service", container: {name: dns, image: "dns:1"}}`,
			`modules[0].replaces_unit: "../../etc/passwd.service" is invalid: a systemd service unit name`},
		{"not a service", `{name: dns, ports: ["53/udp"], replaces_unit: dnsmasq, container: {name: dns, image: "dns:1"}}`,
			`write the unit as systemctl names it, e.g. replaces_unit: dnsmasq.service`},
		{"an option", `{name: dns, ports: ["53/udp"], replaces_unit: "--now.service", container: {name: dns, image: "dns:1"}}`,
			`modules[0].replaces_unit: "--now.service" is invalid`},
		{"no container", `{name: dns, ports: ["53/udp"], replaces_unit: dnsmasq.service, holders: [dnsmasq]}`,
			`modules[0].replaces_unit: "dnsmasq.service" is invalid: a predecessor unit is handed over to the module's container, and module dns has no container`},
		{"overlap", `{name: dns, ports: ["53/udp"], cutover: overlap, replaces_unit: dnsmasq.service, container: {name: dns, image: "dns:1"}}`,
			`a unit is handed over by the swap`},
		{"executable", `{name: dns, ports: ["53/udp"], replaces_exe: dnsmasq, container: {name: dns, image: "dns:1"}}`, ""},
		{"executable path", `{name: dns, ports: ["53/udp"], replaces_exe: /usr/sbin/dnsmasq, container: {name: dns, image: "dns:1"}}`,
			`modules[0].replaces_exe: "/usr/sbin/dnsmasq" is invalid: an executable's base name`},
		{"unit and executable", `{name: dns, ports: ["53/udp"], replaces_unit: dnsmasq.service, replaces_exe: dnsmasq, container: {name: dns, image: "dns:1"}}`,
			`modules[0].replaces_exe: "dnsmasq" is invalid: a module replaces one host predecessor`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(write(t, "node: {name: n1}\nmodules:\n  - "+tc.modules+"\n"))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if p := c.Plan(); p.Modules[0].ReplacesUnit != c.Modules[0].ReplacesUnit || p.Modules[0].ReplacesExe != c.Modules[0].ReplacesExe || p.Modules[0].HostPredecessor() == "" {
					t.Fatalf("the plan does not carry replaces_unit: %+v", p.Modules[0])
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}
