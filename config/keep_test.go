package config

import (
	"strings"
	"testing"

	"adoption/keyfile"
)

// A keep list on a file whose syntax is unknown is refused at validation,
// naming the key and what to do; one on an sshd drop-in is read per key.
func TestKeepNeedsAKnownFormat(t *testing.T) {
	_, err := Load(write(t, `
node: {name: n1}
modules:
  - name: proxy
    ports: ["443/tcp"]
    files:
      - {path: /etc/nginx/nginx.conf, content: "x", keep: [worker_processes]}
      - {path: /etc/app/app.conf, content: "x", format: yaml}
      - {path: /etc/app/b.env, content: "x", keep: ["A=B"]}
`))
	if err == nil {
		t.Fatal("want refusals")
	}
	for _, want := range []string{
		`modules[0].files[0].keep`, `set modules[0].files[0].format to spaced, env or ini`,
		`modules[0].files[1].format: "yaml"`,
		`modules[0].files[2].keep[0]: "A=B"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestKeepTravelsAsKeyNamesOnly(t *testing.T) {
	c, err := Load(write(t, `
node: {name: n1}
modules:
  - name: ssh
    ports: ["22/tcp"]
    files:
      - {path: /etc/ssh/sshd_config.d/10-mesh.conf, content: "PasswordAuthentication no\n", keep: [Port, AllowUsers]}
      - {path: /etc/app/settings, content: "A=1\n", format: env}
`))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Plan().Module("ssh")
	if got := m.Files[0].MergeFormat(); got != keyfile.Env || m.Files[1].MergeFormat() != keyfile.Spaced {
		t.Fatalf("formats: %q %q", got, m.Files[1].MergeFormat())
	}
	if strings.Join(m.Files[1].Keep, ",") != "Port,AllowUsers" {
		t.Fatalf("keep: %v", m.Files[1].Keep)
	}
}
