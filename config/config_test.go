package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if !strings.Contains(body, "authority:") {
		body += "\nauthority:\n  unsigned: true\n" // the tests' nodes take unsigned requests unless they say otherwise
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExampleLoads(t *testing.T) {
	c, err := Load(nodeExample(t))
	if err != nil {
		t.Fatalf("node.example.yaml must be valid: %v", err)
	}
	if c.Node.Name != "n1" || c.Flip.ConfirmTimeout != 2*time.Minute || len(c.Modules) != 2 {
		t.Fatalf("unexpected example: %+v", c)
	}
	p := c.Plan()
	if len(p.Foundation) != 5 || p.Foundation[0].Name != "broker_management" || p.Foundation[0].Port.String() != "15673/tcp" {
		t.Fatalf("foundation plan: %+v", p.Foundation)
	}
	if got := p.DeclaredPaths(); strings.Join(got, ",") != "/etc/hosts,/etc/mail/relay.conf,/etc/ssh/sshd_config.d/50-mesh.conf" {
		t.Fatalf("declared paths: %v", got)
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	t.Setenv("ADOPT_NODE_NAME", "n7")
	t.Setenv("ADOPT_TEMPORAL_ADDRESS", "10.1.2.3:7233")
	t.Setenv("ADOPT_TEMPORAL_TLS_MODE", "off") // plain text to a non-loopback address: only when said
	c, err := Load(nodeExample(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.Name != "n7" || c.Temporal.Address != "10.1.2.3:7233" {
		t.Fatalf("env did not override: node=%q address=%q", c.Node.Name, c.Temporal.Address)
	}
}

func TestPlanCarriesNoContent(t *testing.T) {
	c, err := Load(write(t, `
node: {name: n1}
modules:
  - name: app
    ports: ["8080/tcp"]
    files: [{path: /etc/app.env, content: "PASSWORD=hunter2-secret"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Plan()
	if strings.Contains(strings.ToLower(toJSON(t, p)+toJSON(t, c)), "hunter2") {
		t.Fatal("file content leaked into a serialised plan or config")
	}
	if p.Modules[0].Files[0].SHA256 == "" {
		t.Fatal("plan lost the content's hash")
	}
}

// TestBadInputAllAtOnce: every problem of a list of bad inputs is
// reported in one error that names the key and the value.
func TestBadInputAllAtOnce(t *testing.T) {
	_, err := Load(write(t, `
bogus_key: 1
node:
  role: control
  management_ports: ["22/tcp"]
foundation:
  ports:
    registry: 80/tcpx
    store: 70000/tcp
    bus: 4222/tcp
    overlay: 4222/tcp
modules:
  - name: "mail:evil"
    ports: ["25/tcp"]
    files:
      - {path: /etc/../../shadow, content: x}
      - {path: etc/relative, content: x}
  - name: web
    ports: ["8080/tcp"]
    container: {name: "web/../x", image: web:1}
    typo: true
`))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a ValidationError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`bogus_key: unknown key`,
		`modules[1].typo: unknown key`,
		`node.name: "" is invalid: required`,
		`foundation.ports.registry: "80/tcpx" is invalid: protocol "tcpx"`,
		`foundation.ports.store: "70000/tcp" is invalid: port "70000"`,
		`foundation.ports.overlay: "4222/tcp" is invalid: port 4222/tcp is already claimed by foundation.ports.bus`,
		`modules[0].name: "mail:evil" is invalid`,
		`modules[0].files[0].path: "/etc/../../shadow" is invalid: must be a clean path without '..'`,
		`modules[0].files[1].path: "etc/relative" is invalid: must be absolute`,
		`modules[1].container.name: "web/../x" is invalid`,
		`nothing was changed on the node`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q\nfull error:\n%s", want, msg)
		}
	}
}

func TestParsePort(t *testing.T) {
	for in, want := range map[string]string{"80/tcp": "80/tcp", "53/udp": "53/udp", "65535/tcp": "65535/tcp"} {
		p, err := ParsePort(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePort(%q) = %v, %v", in, p, err)
		}
	}
	for _, in := range []string{"", "80", "0/tcp", "65536/tcp", "80/sctp", "-1/tcp", "x/udp", "80/TCP", " 80/tcp", "+80/tcp", "0080/tcp"} {
		if _, err := ParsePort(in); err == nil {
			t.Errorf("ParsePort(%q) accepted", in)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"n1", "mail", "control-node", "a", "x_y"} {
		if !ValidName(ok) {
			t.Errorf("%q rejected", ok)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "A", "a:b", "a/b", "a b", "a\"b", "a.b", strings.Repeat("a", 33), "a\nb"} {
		if ValidName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParsePortRange(t *testing.T) {
	ps, err := ParsePortRange("9000-9002/tcp")
	if err != nil || len(ps) != 3 || ps[0] != (Port{Num: 9000, Proto: "tcp"}) || ps[2] != (Port{Num: 9002, Proto: "tcp"}) {
		t.Errorf("9000-9002/tcp: %v, %v", ps, err)
	}
	if ps, err := ParsePortRange("25/tcp"); err != nil || len(ps) != 1 || ps[0] != (Port{Num: 25, Proto: "tcp"}) {
		t.Errorf("25/tcp: %v, %v", ps, err)
	}
	for _, bad := range []string{"9010-9000/tcp", "9000-9000/tcp", "1-65535/tcp", "9000-/tcp", "-9000/tcp", "9000-9010", "9000-9010/sctp", "09000-9010/tcp"} {
		if ps, err := ParsePortRange(bad); err == nil {
			t.Errorf("ParsePortRange(%q) accepted: %v", bad, ps)
		}
	}
}

func TestFlipWiden(t *testing.T) {
	c, err := Load(write(t, `
node: {name: n1}
flip:
  widen: ["22/tcp", "9000-9002/udp"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Plan().Widen); got != "[22/tcp 9000/udp 9001/udp 9002/udp]" {
		t.Errorf("plan widen %s", got)
	}
	_, err = Load(write(t, `
node: {name: n1}
flip:
  widen: ["22/tcpx"]
`))
	if err == nil || !strings.Contains(err.Error(), `flip.widen[0]: "22/tcpx" is invalid`) {
		t.Errorf("a bad flip.widen: %v", err)
	}
}

// flip.drop and flip.widen may name a region of packets ("ip udp to
// 239.255.255.250 dport 1900", "icmp type 13": every family it can be),
// or a traffic class by the names from before regions, NAME/PROTO (one
// family's) or NAME (every family's), read as the regions they name; an
// unknown one is refused naming the key, the value and the notation, and
// the plan has none.
func TestFlipDeclaresClasses(t *testing.T) {
	c, err := Load(write(t, `
node: {name: n1}
flip:
  drop: ["25/tcp", "echo-request/icmp", "mdns", "ip udp to 239.255.255.250 dport 1900"]
  widen: ["esp", "echo-request", "ip6 icmpv6 type 139"]
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Plan()
	if got := fmt.Sprint(p.Drop, p.DropClasses, p.Widen, p.WidenClasses); got != "[25/tcp] [ip icmp type 8 ip udp to 224.0.0.251 dport 5353 ip6 udp to ff02::fb dport 5353 ip udp to 239.255.255.250 dport 1900] [] [ip esp ip6 esp ip icmp type 8 ip6 icmpv6 type 128 ip6 icmpv6 type 139]" {
		t.Errorf("plan: %s", got)
	}
	if p.Hash() == (Plan{}).Hash() || Diff(p, Plan{Node: p.Node}) == nil {
		t.Error("the declared classes are not part of the plan's hash")
	}
	for _, bad := range []string{"ping", "echo-request/tcp", "mdns/icmp", "Esp", "icmp type 300", "ip6 udp to 10.0.0.1"} {
		_, err = Load(write(t, "node: {name: n1}\nflip:\n  widen: [\""+bad+"\"]\n"))
		if err == nil || !strings.Contains(err.Error(), `flip.widen[0]: "`+bad+`" is invalid`) || !strings.Contains(err.Error(), "[ip|ip6] PROTO [type T[-U]]") {
			t.Errorf("flip.widen %q: %v", bad, err)
		}
	}
}
