package config

import (
	"strings"
	"testing"
)

// The keys that say what a module's container takes over.
func TestContainerCarryKeys(t *testing.T) {
	c, err := Load(write(t, `
node: {name: n1}
modules:
  - name: web
    ports: ["8443/tcp"]
    container:
      name: web
      image: web:2
      env: ["SECRET_TOKEN=tok-planted-value", "Mode=primary"]
      env_file: /etc/web/web.env
      labels: ["com.example.Team=ops"]
      keep: [Mode, com.example.Team]
      drop_ports: ["8080/tcp"]
      replaces: [proxy]
`))
	if err != nil {
		t.Fatal(err)
	}
	ct := c.Plan().Modules[0].Container
	js := toJSON(t, c.Plan())
	if strings.Contains(js, "tok-planted-value") || strings.Contains(js, "primary") {
		t.Fatalf("an environment value is in the plan: %s", js)
	}
	if len(ct.EnvSHA256) != 2 || ct.EnvSHA256["Mode"] == "" || ct.EnvSHA256["SECRET_TOKEN"] == "" {
		t.Fatalf("env names and hashes (case kept): %v", ct.EnvSHA256)
	}
	if string(c.Contents()[ct.EnvSHA256["SECRET_TOKEN"]]) != "tok-planted-value" {
		t.Fatal("the node's configuration does not hold the value by its hash")
	}
	if ct.EnvFile != "/etc/web/web.env" || ct.Labels[0] != "com.example.Team=ops" || ct.Replaces[0] != "proxy" || ct.DropPorts[0] != "8080/tcp" ||
		strings.Join(ct.Keep, ",") != "Mode,com.example.Team" {
		t.Fatalf("container plan: %+v", ct)
	}
}

func TestContainerCarryKeysBadInput(t *testing.T) {
	for _, tc := range []struct{ body, key string }{
		{`env: ["=x"]`, "modules[0].container.env[0]"},
		{`env: ["NOVALUE"]`, "modules[0].container.env[0]"},
		{`env: ["A=1", "A=2"]`, "modules[0].container.env[1]"},
		{`env_file: /etc/../../outside.env`, "modules[0].container.env_file"},
		{`env_file: relative.env`, "modules[0].container.env_file"},
		{`replaces: [web]`, "modules[0].container.replaces[0]"},
		{`replaces: [proxy, proxy]`, "modules[0].container.replaces[1]"},
		{`replaces: [proxy.predecessor]`, "modules[0].container.replaces[0]"},
		{`drop_ports: ["80"]`, "modules[0].container.drop_ports[0]"},
		{`labels: ["adoption.module=x"]`, "modules[0].container.labels[0]"},
		{`keep: ["BAD NAME"]`, "modules[0].container.keep[0]"},
		{`keep: [MODE, MODE]`, "modules[0].container.keep[1]"},
		{`keep: [adoption.module]`, "modules[0].container.keep[0]"},
	} {
		_, err := Load(write(t, `
node: {name: n1}
modules:
  - name: web
    ports: ["8443/tcp"]
    container:
      name: web
      image: web:2
      `+tc.body+`
`))
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: want an error naming %s, got %v", tc.body, tc.key, err)
		}
		if err != nil && strings.Contains(tc.body, "=") && strings.Contains(err.Error(), "=2") {
			t.Errorf("%s: the error shows a value: %v", tc.body, err)
		}
	}
	// Two modules taking over the same container.
	_, err := Load(write(t, `
node: {name: n1}
modules:
  - {name: a, ports: ["81/tcp"], container: {name: a, image: a:1, replaces: [proxy]}}
  - {name: b, ports: ["82/tcp"], container: {name: b, image: b:1, replaces: [proxy]}}
`))
	if err == nil || !strings.Contains(err.Error(), "modules[1].container.replaces[0]") || !strings.Contains(err.Error(), "module a also takes over") {
		t.Fatalf("two successors: %v", err)
	}
}
