package config_test

// Fuzz targets for the configuration loader.
//
//	go test -run '^$' -fuzz '^FuzzLoadConfig$' -fuzztime 60s ./config
//	go test -run '^$' -fuzz '^FuzzParsePort$'  -fuzztime 60s ./config
//	go test -run '^$' -fuzz '^FuzzValidName$'  -fuzztime 60s ./config
//
// Without -fuzz, `go test` runs each target over its seeds (f.Add below and
// testdata/fuzz/<Target>/) as ordinary unit tests.

import (
	"encoding/json"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"adoption/config"
)

// fuzzConfigSeeds are YAML documents that reach deep into the loader: a
// valid one, one with every kind of problem, and shapes viper and
// mapstructure have to cope with.
var fuzzConfigSeeds = []string{
	`node: {name: n1}`,
	`
temporal: {address: "127.0.0.1:7233", namespace: default, tls: {cert: /c.pem, key: /k.pem}}
node: {name: n1, role: control, root: /srv/root, state_dir: /var/lib/adoption, management_ports: ["22/tcp", " 2222/tcp"]}
predecessor: {control: [predecessor-sync]}
foundation:
  ports: {registry: 5001/tcp, overlay: 51821/udp}
  containers: [{name: reg, image: "registry:2", ports: {"127.0.0.1:5001/tcp": "5000/tcp"}}]
modules:
  - name: mail
    ports: ["25/tcp", "587/tcp"]
    container: {name: mail, image: "mesh/mail:1.0", cmd: [run], ports: {"25/tcp": "25/tcp"}}
    files: [{path: /etc/mail/relay.conf, mode: "0640", content: "relay = mesh\n"}]
    health: {tcp: "127.0.0.1:25", timeout: 10s}
node_files: [{path: /etc/hosts, content: "127.0.0.1 localhost\n"}]
flip: {drop: ["8081/tcp"], confirm_timeout: 2m}
firewall: {reconcile_interval: 0s}
cutover: {stop_timeout: 10s}
drift: {interval: 5m}
labels: {site: a}
`,
	`
bogus_key: 1
node: {role: boss, root: relative, state_dir: /a/../b, management_ports: ["22"]}
foundation: {ports: {Registry: 80/tcpx, store: 70000/tcp, bus: 4222/tcp, overlay: 4222/tcp}}
modules:
  - {name: "mail:evil", ports: ["25/tcp"], files: [{path: /etc/../../shadow}, {path: etc/rel}, {path: /x, mode: "999"}]}
  - {name: web, container: {name: "web/../x", image: ""}, typo: true, health: {tcp: x, http: ftp://x}}
  - {name: foundation}
flip: {confirm_timeout: -1s}
`,
	`node: {name: [a, b], management_ports: {a: b}}`,
	`modules: "a,b"`,
	`node: {management_ports: "22/tcp,80/tcp", name: n1}`,
	`flip: {confirm_timeout: 12}`,
	`a: &x {b: *x}`,
	`[1, 2, 3]`,
	`just a string`,
	"node:\n\tname: n1\n",
	`{node: {name: n1}, node.name: n2}`,
	`foundation: {ports: {a.b: 1/tcp}}`,
	`node: {name: n1}
modules: [{name: m, files: [{path: /a, content: {secret: hunter2}}]}]`,
	`node: {name: n1}
modules: [{name: m, container: {name: m, image: i, ports: {"[::1]:80/tcp": "80/tcp"}}}]`,
	"\xff\xfe\x00",
	``,
	`~`,
}

// FuzzLoadConfig writes arbitrary bytes as a YAML file and loads it. Load
// must never panic; an error is either the list of problems
// (*config.ValidationError, naming the file) or a read error naming the file;
// a configuration it accepts validates, plans without panicking, and its
// plan holds only valid names, clean absolute paths and real ports.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range fuzzConfigSeeds {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile("node.example.yaml"); err == nil {
		f.Add(b)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(dir, "node.yaml") // one worker runs one input at a time
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadWithin(t, file, data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Load returned both a config and an error: %v", err)
			}
			checkLoadError(t, file, err)
			return
		}
		if cfg == nil {
			t.Fatal("Load returned neither a config nor an error")
		}
		checkAccepted(t, file, cfg)
	})
}

// loadTimeout bounds one Load: the fuzzer has no per-input timeout of its
// own, and a hang would otherwise only show as "0 execs/sec".
const loadTimeout = 10 * time.Second

func loadWithin(t *testing.T, file string, data []byte) (*config.Config, error) {
	t.Helper()
	type res struct {
		cfg *config.Config
		err error
	}
	done := make(chan res, 1)
	go func() {
		cfg, err := config.Load(file)
		done <- res{cfg, err}
	}()
	select {
	case r := <-done:
		return r.cfg, r.err
	case <-time.After(loadTimeout):
		t.Fatalf("Load did not return within %s on %d bytes: %q", loadTimeout, len(data), data)
		return nil, nil
	}
}

func checkLoadError(t *testing.T, file string, err error) {
	t.Helper()
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		if ve.Source != file {
			t.Errorf("ValidationError.Source = %q, want the file %q", ve.Source, file)
		}
		if len(ve.Problems) == 0 {
			t.Errorf("ValidationError with no problems: %v", err)
		}
		for i, p := range ve.Problems {
			if strings.TrimSpace(p) == "" {
				t.Errorf("problem %d is empty: %q", i, ve.Problems)
			}
		}
		if !strings.Contains(err.Error(), "nothing was changed on the node") {
			t.Errorf("validation error does not say nothing changed: %v", err)
		}
		return
	}
	if !strings.HasPrefix(err.Error(), "config file "+file+": ") {
		t.Fatalf("error is neither a *config.ValidationError nor a read error naming %s: %T %v", file, err, err)
	}
}

func checkAccepted(t *testing.T, file string, cfg *config.Config) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Load accepted a configuration that does not validate: %v", err)
	}
	// Load must not have swallowed a decode error: the file decodes
	// strictly on its own.
	strictDecode(t, file)

	p := cfg.Plan()
	if !config.ValidName(p.Node) {
		t.Errorf("plan node name %q is not a valid name", p.Node)
	}
	if p.Role != "control" && p.Role != "member" {
		t.Errorf("plan role %q", p.Role)
	}
	checkPorts := func(what string, ps []config.Port) {
		for _, q := range ps {
			checkPort(t, what, q)
		}
	}
	checkPorts("management port", p.ManagementPorts)
	checkPorts("flip.drop", p.Drop)
	seen := map[config.Port]string{}
	claim := func(owner string, q config.Port) {
		checkPort(t, owner, q)
		if first, ok := seen[q]; ok {
			t.Errorf("port %s claimed by %s and %s", q, first, owner)
		}
		seen[q] = owner
	}
	for _, np := range p.Foundation {
		if !config.ValidName(np.Name) {
			t.Errorf("foundation port name %q is not a valid name", np.Name)
		}
		claim("foundation."+np.Name, np.Port)
	}
	names := map[string]bool{}
	for _, m := range p.Modules {
		if !config.ValidName(m.Name) || m.Name == "foundation" {
			t.Errorf("module name %q is not a valid module name", m.Name)
		}
		if names[m.Name] {
			t.Errorf("module %q twice in the plan", m.Name)
		}
		names[m.Name] = true
		for _, q := range m.Ports {
			claim(m.Name, q)
		}
		if m.Container != nil && !config.ValidName(m.Container.Name) {
			t.Errorf("module %s: container name %q is not a valid name", m.Name, m.Container.Name)
		}
		checkFiles(t, m.Files)
	}
	checkFiles(t, p.NodeFiles)
	declared := p.DeclaredPaths()
	for i, dp := range declared {
		checkPath(t, dp)
		if i > 0 && declared[i-1] >= dp {
			t.Errorf("declared paths not sorted and unique: %q", declared)
		}
	}
	if p.ConfirmTimeout <= 0 || p.ReconcileInterval < 0 || p.DriftInterval < 0 || p.StopTimeout < 0 {
		t.Errorf("plan durations out of range: %+v", p)
	}
	// The plan travels through Temporal as JSON and must carry no content.
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("plan does not marshal: %v", err)
	}
	var back config.Plan
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("plan does not unmarshal: %v", err)
	}
	contents := cfg.Contents()
	for _, fp := range append(append([]config.FilePlan(nil), p.NodeFiles...), moduleFiles(p)...) {
		if _, ok := contents[fp.SHA256]; !ok {
			t.Errorf("file %s: content hash %s missing from Contents()", fp.Path, fp.SHA256)
		}
	}
}

func moduleFiles(p config.Plan) []config.FilePlan {
	var out []config.FilePlan
	for _, m := range p.Modules {
		out = append(out, m.Files...)
	}
	return out
}

func checkFiles(t *testing.T, fs []config.FilePlan) {
	t.Helper()
	for _, f := range fs {
		checkPath(t, f.Path)
		if len(f.SHA256) != 64 {
			t.Errorf("file %s: sha256 %q", f.Path, f.SHA256)
		}
		if f.Mode != "" {
			m, err := strconv.ParseUint(f.Mode, 8, 32)
			if err != nil || m > 0o7777 {
				t.Errorf("file %s: mode %q accepted", f.Path, f.Mode)
			}
		}
	}
}

func checkPath(t *testing.T, p string) {
	t.Helper()
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.Contains(p, "..") || strings.ContainsRune(p, 0) {
		t.Errorf("declared path %q is not a clean absolute path of a file", p)
	}
}

func checkPort(t *testing.T, what string, p config.Port) {
	t.Helper()
	if p.Num == 0 || (p.Proto != "tcp" && p.Proto != "udp") {
		t.Errorf("%s: port %+v in the plan", what, p)
	}
	q, err := config.ParsePort(p.String())
	if err != nil || q != p {
		t.Errorf("%s: ParsePort(%q) = %+v, %v; want %+v", what, p.String(), q, err, p)
	}
}

// strictDecode decodes the file the way LoadWith does (same hooks, unknown
// keys refused) and fails if that reports anything.
func strictDecode(t *testing.T, file string) {
	t.Helper()
	v := viper.New()
	v.SetConfigFile(file)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		t.Fatalf("Load accepted %s but viper cannot read it: %v", file, err)
	}
	var c config.Config
	err := v.Unmarshal(&c, func(dc *mapstructure.DecoderConfig) {
		dc.ErrorUnused = true
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		)
	})
	if err != nil {
		t.Fatalf("Load accepted %s although it does not decode: %v", file, err)
	}
}

// FuzzParsePort: whatever ParsePort accepts is a real port whose String()
// parses back to the same value; what it refuses comes with a reason.
func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"80/tcp", " 53/udp\n", "65535/tcp", "0/tcp", "65536/udp", "+80/tcp", "080/tcp",
		"-0/tcp", "80/TCP", "80/tcp/udp", "/tcp", "80/", "", "٣/tcp", "1e3/tcp", "0x50/tcp", "80 /tcp"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := config.ParsePort(s)
		if err != nil {
			if err.Error() == "" {
				t.Errorf("ParsePort(%q): empty error", s)
			}
			if p != (config.Port{}) {
				t.Errorf("ParsePort(%q) = %+v with error %v", s, p, err)
			}
			if ref, ok := refParsePort(s); ok {
				t.Errorf("ParsePort(%q) refused %v, reference parses %+v", s, err, ref)
			}
			return
		}
		if p.Num == 0 || (p.Proto != "tcp" && p.Proto != "udp") {
			t.Fatalf("ParsePort(%q) = %+v: not a port", s, p)
		}
		str := p.String()
		q, err := config.ParsePort(str)
		if err != nil || q != p {
			t.Fatalf("round trip: ParsePort(%q) = %+v, %v; want %+v", str, q, err, p)
		}
		if str != strconv.Itoa(int(p.Num))+"/"+p.Proto {
			t.Fatalf("String() = %q for %+v", str, p)
		}
		// Every accepted spelling is the canonical one: ParsePort takes no
		// space, sign or leading zero, so the cutover's parser agrees.
		if ref, ok := refParsePort(s); !ok || ref != p {
			t.Fatalf("ParsePort(%q) = %+v; reference %+v, %v", s, p, ref, ok)
		}
	})
}

// refParsePort is ParsePort written out by hand: PORT is an optional sign
// and ASCII digits with the value 1-65535, PROTO exactly tcp or udp,
// surrounding Unicode space ignored.
func refParsePort(s string) (config.Port, bool) {
	// Strict, as the cutover's own parser is: digits only, no sign, no
	// leading zero, no surrounding space.
	i := strings.IndexByte(s, '/')
	if i < 0 {
		return config.Port{}, false
	}
	num, proto := s[:i], s[i+1:]
	if proto != "tcp" && proto != "udp" {
		return config.Port{}, false
	}
	if num == "" || num[0] == '0' {
		return config.Port{}, false
	}
	n := 0
	for _, c := range []byte(num) {
		if c < '0' || c > '9' {
			return config.Port{}, false
		}
		n = min(n*10+int(c-'0'), 1<<20) // saturate: only 1-65535 matters
	}
	if n < 1 || n > 65535 {
		return config.Port{}, false
	}
	return config.Port{Num: uint16(n), Proto: proto}, true
}

// FuzzValidName: ValidName agrees with the documented rule (NameRule), and a
// valid name is safe where names end up: rule comments, container names,
// paths under state_dir.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"n1", "a", "x_y", "control-node", strings.Repeat("a", 32), strings.Repeat("a", 33),
		"", "-a", "a-", "A", "a:b", "a/b", "a\n", "\na", "é", "a.b", "..", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := config.ValidName(s)
		if want := refValidName(s); got != want {
			t.Fatalf("ValidName(%q) = %v, the rule says %v", s, got, want)
		}
		if !got {
			return
		}
		if len(s) > config.MaxNameLen || !utf8.ValidString(s) || strings.ContainsAny(s, ":/ \t\n\x00.\"'`$\\") {
			t.Fatalf("ValidName accepted %q, which is unsafe in a comment, a container name or a path", s)
		}
		comment := "adoption:" + s + ":" + s + ":65535/tcp"
		if len(comment) > 127 {
			t.Fatalf("mark comment %q is %d bytes, over the kernel's limit", comment, len(comment))
		}
		if parts := strings.Split(comment, ":"); len(parts) != 4 || parts[1] != s {
			t.Fatalf("mark comment %q does not split back into its parts", comment)
		}
	})
}

// refValidName is NameRule written out by hand.
func refValidName(s string) bool {
	if len(s) < 1 || len(s) > 32 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}
