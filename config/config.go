// Package config is the only place that knows viper. Everything else receives
// a typed, validated Config (or the Plan derived from it).
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"golang.org/x/crypto/ssh"
)

// Config is the whole configuration: how to reach Temporal, where the node's
// parts are, and the plan for the node (its modules, files and flip).
type Config struct {
	Temporal    Temporal         `mapstructure:"temporal" json:"temporal"`
	Docker      Docker           `mapstructure:"docker" json:"docker"`
	Node        Node             `mapstructure:"node" json:"node"`
	Predecessor Predecessor      `mapstructure:"predecessor" json:"predecessor"`
	Foundation  Foundation       `mapstructure:"foundation" json:"foundation"`
	Modules     []Module         `mapstructure:"modules" json:"modules"`
	NodeFiles   []File           `mapstructure:"node_files" json:"node_files"`
	Flip        Flip             `mapstructure:"flip" json:"flip"`
	Firewall    FirewallSettings `mapstructure:"firewall" json:"firewall"`
	Cutover     CutoverSettings  `mapstructure:"cutover" json:"cutover"`
	Drift       DriftSettings    `mapstructure:"drift" json:"drift"`
	Metrics     Metrics          `mapstructure:"metrics" json:"metrics"`
	Log         Log              `mapstructure:"log" json:"log"`
	// Authority is who may make the node act (authority.go).
	Authority Authority `mapstructure:"authority" json:"authority"`
	// Operator is the operator's side: the key the CLI signs with.
	Operator Operator `mapstructure:"operator" json:"operator"`
}

type Temporal struct {
	Address   string `mapstructure:"address" json:"address"`
	Namespace string `mapstructure:"namespace" json:"namespace"`
	TLS       TLS    `mapstructure:"tls" json:"tls"`
	// CodecKeyFile names the codec key (codeckey.go): payloads are
	// encrypted with it and the plan's digests keyed by it. Empty: plain
	// payloads and plain sha256 digests, with a warning at start.
	CodecKeyFile string `mapstructure:"codec_key_file" json:"codec_key_file,omitempty"`
	// Key is the codec key CodecKeyFile holds, read by Load: its first
	// key, which encrypts and keys the digests.
	Key []byte `mapstructure:"-" json:"-"`
	// OlderKeys are the file's other keys: they only decrypt (payloads
	// written before a rotation).
	OlderKeys [][]byte `mapstructure:"-" json:"-"`
	// AddressFrom and NamespaceFrom say where Address and Namespace came
	// from (the file, an ADOPT_* variable, the default), set by Load, so
	// that a dial's error blames the right one.
	AddressFrom   string `mapstructure:"-" json:"-"`
	NamespaceFrom string `mapstructure:"-" json:"-"`
}

type TLS struct {
	Cert       string `mapstructure:"cert" json:"cert,omitempty"`
	Key        string `mapstructure:"key" json:"key,omitempty"`
	CA         string `mapstructure:"ca" json:"ca,omitempty"`
	ServerName string `mapstructure:"server_name" json:"server_name,omitempty"`
	// Mode "off" says plain text on purpose: a non-loopback
	// temporal.address without TLS is refused unless it is set (or the
	// whole key is spelled `tls: off`).
	Mode string `mapstructure:"mode" json:"mode,omitempty"`
}

// TLSOff is temporal.tls.mode's one value: plain text, explicitly.
const TLSOff = "off"

// Enabled reports whether any TLS setting was given: setting any one of
// them (server_name alone included) means the operator expects TLS, and a
// plain-text connection would silently ignore that. Mode is not one.
func (t TLS) Enabled() bool { return t.Cert != "" || t.Key != "" || t.CA != "" || t.ServerName != "" }

type Node struct {
	Name            string   `mapstructure:"name" json:"name"`
	Role            string   `mapstructure:"role" json:"role"`
	Netns           string   `mapstructure:"netns" json:"netns,omitempty"`
	Root            string   `mapstructure:"root" json:"root"`
	StateDir        string   `mapstructure:"state_dir" json:"state_dir"`
	ManagementPorts []string `mapstructure:"management_ports" json:"management_ports"`
}

type Predecessor struct {
	// Control lists the executable names of the predecessor's control
	// daemons: adoption refuses while one of them runs.
	Control []string `mapstructure:"control" json:"control"`
}

type Foundation struct {
	Ports      map[string]string `mapstructure:"ports" json:"ports"`
	Containers []Container       `mapstructure:"containers" json:"containers,omitempty"`
}

type Module struct {
	Name      string     `mapstructure:"name" json:"name"`
	Ports     []string   `mapstructure:"ports" json:"ports"`
	Container *Container `mapstructure:"container" json:"container,omitempty"`
	Files     []File     `mapstructure:"files" json:"files,omitempty"`
	Health    *Health    `mapstructure:"health" json:"health,omitempty"`
	// Holders, for a module with no container (a service on the node
	// itself), are the executable names of its own service: they may hold
	// its ports at the cutover, and any other holder refuses it.
	Holders []string `mapstructure:"holders" json:"holders,omitempty"`
	// Cutover is how the module's container is cut over: "swap" (the
	// default, empty: the predecessor stopped, the new one started, new
	// connections held between) or "overlap" (the new one started beside
	// the predecessor, the published port moved to it at once), for a
	// service that allows two instances on its data at the same time.
	Cutover string `mapstructure:"cutover" json:"cutover,omitempty"`
	// ReplacesUnit is the predecessor's system unit the module's container
	// takes over (a resolver's dnsmasq.service): the cutover stops it,
	// holds its ports, starts the container, and starts it again on a
	// rollback; it is disabled once the cutover is confirmed.
	ReplacesUnit string `mapstructure:"replaces_unit" json:"replaces_unit,omitempty"`
	// ReplacesExe is the same for a predecessor that is a bare executable
	// (no unit), found by its base name: stopped by signal, its command
	// line kept to start it again on a rollback.
	ReplacesExe string `mapstructure:"replaces_exe" json:"replaces_exe,omitempty"`
}

// Cutover kinds (Module.Cutover).
const (
	CutoverSwap    = "swap"
	CutoverOverlap = "overlap"
)

// Container is a module's container. What it does not set, the new
// container inherits from the predecessor it replaces (environment, labels,
// networks, restart policy, user, limits, ...; see containers.Create).
type Container struct {
	Name  string            `mapstructure:"name" json:"name"`
	Image string            `mapstructure:"image" json:"image"`
	Cmd   []string          `mapstructure:"cmd" json:"cmd,omitempty"`
	Ports map[string]string `mapstructure:"ports" json:"ports,omitempty"` // host PORT/PROTO -> container PORT/PROTO
	// Env overrides environment variables, as NAME=VALUE (a list, not a
	// map: the loader lowercases map keys, and variable names are case
	// sensitive). Its values never leave the node's configuration: the plan
	// carries EnvSHA256 instead (digests, keyed with a codec key), and the
	// worker looks each value up by its digest in its own configuration.
	Env       []string          `mapstructure:"env" json:"-"`
	EnvSHA256 map[string]string `mapstructure:"-" json:"env_sha256,omitempty"` // name -> digest of the value (Plan.Digests' kind); filled by Plan
	// EnvFile is a file of NAME=VALUE lines under node.root, read on the
	// node at the cutover; Env wins over it.
	EnvFile string `mapstructure:"env_file" json:"env_file,omitempty"`
	// Labels override the predecessor's, as KEY=VALUE (case kept).
	Labels []string `mapstructure:"labels" json:"labels,omitempty"`
	// Keep names environment variables and labels whose value the
	// predecessor's container set that stays, over env and labels.
	Keep []string `mapstructure:"keep" json:"keep,omitempty"`
	// DropPorts are host PORT/PROTO the predecessor publishes that the
	// module deliberately stops publishing; any other would refuse.
	DropPorts []string `mapstructure:"drop_ports" json:"drop_ports,omitempty"`
	// Replaces names predecessor containers of other names that the module
	// takes over (e.g. a reverse proxy holding its ports).
	Replaces []string `mapstructure:"replaces" json:"replaces,omitempty"`
	// Exclusive names the named volumes of the predecessor that one
	// instance at a time may use: an overlap cutover refuses them.
	Exclusive []string `mapstructure:"exclusive" json:"exclusive,omitempty"`
}

// File is a file the mesh declares under node.root. Its content is the mesh's
// version, written when its owner converges; until then the found file is kept.
type File struct {
	Path    string `mapstructure:"path" json:"path"`
	Content string `mapstructure:"content" json:"-"` // never serialised: it may hold secrets
	Mode    string `mapstructure:"mode" json:"mode,omitempty"`
	// Keep names the found file's load-bearing keys: converging merges
	// per key and these keep the node's value (keyfile.Merge).
	Keep []string `mapstructure:"keep" json:"keep,omitempty"`
	// Format is the file's syntax for a per-key merge (spaced, env, ini);
	// inferred from the path when empty.
	Format string `mapstructure:"format" json:"format,omitempty"`
}

type Health struct {
	TCP     string        `mapstructure:"tcp" json:"tcp,omitempty"`
	HTTP    string        `mapstructure:"http" json:"http,omitempty"`
	Timeout time.Duration `mapstructure:"timeout" json:"timeout,omitempty"`
}

type Flip struct {
	// Drop lists what the flip may close: ports (PORT/PROTO or
	// FROM-TO/PROTO) and traffic classes (echo-request/icmp, mdns, esp).
	Drop []string `mapstructure:"drop" json:"drop"`
	// Widen lists the ports (PORT/PROTO or FROM-TO/PROTO) and traffic
	// classes (NAME/PROTO or NAME) whose found
	// restriction (sources, interfaces, deny lists, rate limits) the flip
	// may let go: the mesh opens them to every source. Any other port the
	// found firewall restricts keeps its restriction, or the preview
	// refuses.
	Widen          []string      `mapstructure:"widen" json:"widen,omitempty"`
	ConfirmTimeout time.Duration `mapstructure:"confirm_timeout" json:"confirm_timeout"`
	// MaxConfirmTimeout bounds confirm_timeout: past it a flip that cut the
	// node off would stay in force too long for its watchdog to matter.
	MaxConfirmTimeout time.Duration `mapstructure:"max_confirm_timeout" json:"max_confirm_timeout"`
	// EnableBootService lets the commit enable nftables.service (and
	// switch off netfilter-persistent) under node.root itself, in custody,
	// where the boot would not load the mesh's table; without it the commit
	// refuses and names the command to run.
	EnableBootService bool `mapstructure:"enable_boot_service" json:"enable_boot_service,omitempty"`
	// Witness is where a flip is confirmed from, outside the node.
	Witness Witness `mapstructure:"witness" json:"witness,omitzero"`
}

// Witness says how the orchestrator checks, after a flip, that a
// management port still answers from outside the node: it dials Address
// (the node's management address as the operator reaches it; empty: the
// node's own addresses as its probe reported them) from From (an address
// of the orchestrator's host, e.g. the operator's VPN address; empty: the
// route's choice).
//
// Disabled confirms a flip from the node alone: for a simulation, or a node
// no orchestrator can reach. A flip that locks the operators out is then
// confirmed; the flip's events say it was not witnessed.
type Witness struct {
	Address string `mapstructure:"address" json:"address,omitempty"`
	From    string `mapstructure:"from" json:"from,omitempty"`
	// Netns, when set, is a network namespace of the orchestrator's host
	// (a path such as /run/netns/ops) the witness dials from: where the
	// operators' network is, on a host (or a sandbox) that keeps it apart.
	Netns    string `mapstructure:"netns" json:"netns,omitempty"`
	Disabled bool   `mapstructure:"disabled" json:"disabled,omitempty"`
	// Key is the witness's public key (authorized_keys lines, several
	// during a rotation): the node takes a verdict that a management port
	// answered only signed by it (witness/signed.go). Without one, a
	// witnessed flip is refused before anything is applied.
	Key KeyLines `mapstructure:"key" json:"key,omitempty"`
}

// Keys parses flip.witness.key: one SSH public key a line, no options.
func (w Witness) Keys() ([]ssh.PublicKey, error) {
	var keys []ssh.PublicKey
	for i, line := range w.Key {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, _, options, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err == nil && len(options) > 0 {
			err = fmt.Errorf("options %q are not taken", strings.Join(options, ","))
		}
		if err != nil {
			return nil, fmt.Errorf("flip.witness.key line %d: %v: it must be the witness's public key line (ssh-ed25519 AAAA... comment), as `ssh-keygen -y -f` prints it", i+1, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// Witnessed reports whether the node's flips are witnessed from outside.
func (w *Witness) Witnessed() bool { return w == nil || !w.Disabled }

// HardMaxConfirmTimeout is the most flip.max_confirm_timeout may be.
const HardMaxConfirmTimeout = 24 * time.Hour

type FirewallSettings struct {
	ReconcileInterval time.Duration `mapstructure:"reconcile_interval" json:"reconcile_interval"`
}

type CutoverSettings struct {
	StopTimeout time.Duration `mapstructure:"stop_timeout" json:"stop_timeout"`
}

type DriftSettings struct {
	Interval time.Duration `mapstructure:"interval" json:"interval"`
}

// EnvPrefix prefixes every environment override: ADOPT_NODE_NAME overrides
// node.name.
const EnvPrefix = "ADOPT"

// defaults are also the list of scalar keys an environment variable can
// override: viper only applies AutomaticEnv to keys it knows of.
var defaults = map[string]any{
	"temporal.address":            "127.0.0.1:7233",
	"temporal.namespace":          "default",
	"temporal.tls.cert":           "",
	"temporal.tls.key":            "",
	"temporal.tls.ca":             "",
	"temporal.tls.server_name":    "",
	"temporal.tls.mode":           "",
	"temporal.codec_key_file":     "",
	"docker.host":                 "",
	"node.name":                   "",
	"node.role":                   "member",
	"node.netns":                  "",
	"node.root":                   "/",
	"node.state_dir":              "/var/lib/adoption",
	"node.management_ports":       []string{"22/tcp"},
	"predecessor.control":         []string{},
	"flip.drop":                   []string{},
	"flip.widen":                  []string{},
	"flip.confirm_timeout":        "2m",
	"flip.max_confirm_timeout":    "30m",
	"flip.enable_boot_service":    false,
	"flip.witness.address":        "",
	"flip.witness.from":           "",
	"flip.witness.netns":          "",
	"flip.witness.disabled":       false,
	"firewall.reconcile_interval": "1m",
	"cutover.stop_timeout":        "10s",
	"drift.interval":              "5m",
	"metrics.listen":              "",
	"log.format":                  "text",
	"log.level":                   "info",
	"operator.sign_key":           "",
	"operator.intent_ttl":         "30m",
	"operator.fleet_intent_ttl":   "12h",
}

// tlsOffHook reads `temporal: {tls: off}` as temporal.tls.mode: off.
func tlsOffHook(from, to reflect.Type, data any) (any, error) {
	if s, ok := data.(string); ok && to == reflect.TypeOf(TLS{}) && from.Kind() == reflect.String && strings.EqualFold(s, TLSOff) {
		return map[string]any{"mode": TLSOff}, nil
	}
	return data, nil
}

// Load reads the configuration from path (YAML), or from $ADOPT_CONFIG when
// path is empty, or only defaults and environment when both are empty; then
// applies ADOPT_* overrides and validates. Every problem is reported at once.
func Load(path string) (*Config, error) { return LoadWith(path, nil) }

// LoadWith is Load with extra defaults, which the file and the environment
// still override (the CLI uses it to talk to Temporal without a node).
func LoadWith(path string, extra map[string]string) (*Config, error) {
	if path == "" {
		path = os.Getenv("ADOPT_CONFIG")
	}
	v := viper.New()
	for k, d := range defaults {
		v.SetDefault(k, d)
	}
	for k, d := range extra {
		v.SetDefault(k, d)
	}
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			var parse viper.ConfigParseError
			if errors.As(err, &parse) {
				if serr := syntaxError(path); serr != nil {
					return nil, fmt.Errorf("config file %s: %w", path, serr)
				}
			}
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	var c Config
	var problems []string
	err := v.Unmarshal(&c, func(dc *mapstructure.DecoderConfig) {
		dc.ErrorUnused = true
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			keyLinesHook,
			durationHook,
			mapstructure.StringToSliceHookFunc(","),
			tlsOffHook,
		)
	})
	badKeys := map[string]bool{}
	if p := c.Temporal.loadCodecKey(); p != "" {
		problems = append(problems, p)
		badKeys[CodecKeyFileKey] = true
	}
	if err != nil {
		for _, p := range decodeProblems(err, NodeFile, func(key string) string { return fmt.Sprint(v.Get(key)) }) {
			problems = append(problems, p)
			key, _, _ := strings.Cut(p, ":")
			badKeys[key] = true
		}
	}
	if verr := c.Validate(); verr != nil {
		var ve *ValidationError
		if errors.As(verr, &ve) {
			for _, p := range ve.Problems {
				// A key that did not decode is already reported; its zero
				// value would only add a second, misleading complaint.
				if key, _, _ := strings.Cut(p, ":"); !badKeys[key] {
					problems = append(problems, p)
				}
			}
		}
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Source: path, Problems: fromEnv(problems, os.LookupEnv)}
	}
	c.Temporal.AddressFrom = keySource(v, "temporal.address", path)
	c.Temporal.NamespaceFrom = keySource(v, "temporal.namespace", path)
	return &c, nil
}

// keySource says where key's value came from: its ADOPT_* variable, the
// file, or the default.
func keySource(v *viper.Viper, key, path string) string {
	if s, set := os.LookupEnv(EnvVar(key)); set && s != "" {
		return EnvVar(key)
	}
	if path != "" && v.InConfig(key) {
		return key + " in " + path
	}
	return key + "'s default"
}

// EnvVar is the environment variable that overrides key: ADOPT_NODE_ROLE
// for node.role.
func EnvVar(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// fromEnv names the environment variable in each problem whose value came
// from it (it overrides the file), so the operator fixes the variable and
// not the file.
func fromEnv(problems []string, lookup func(string) (string, bool)) []string {
	out := make([]string, len(problems))
	for i, p := range problems {
		out[i] = p
		key, _, _ := strings.Cut(p, ":")
		if _, known := defaults[key]; !known {
			continue
		}
		if _, set := lookup(EnvVar(key)); set {
			out[i] = p + " (the value comes from the environment variable " + EnvVar(key) + ", which overrides the file: fix or unset it)"
		}
	}
	return out
}

var (
	invalidKeys = regexp.MustCompile(`'([^']*)' has invalid keys: (.*)`)
	badValue    = regexp.MustCompile(`^'([^']+)' (.*)$`)
)

// yamlKey turns mapstructure's field path into the key as the YAML spells
// it: the root struct's name is not part of it.
func yamlKey(k string) string { return strings.TrimPrefix(strings.TrimPrefix(k, "config.Config"), ".") }

// decodeProblems turns mapstructure's error into one line per problem, naming
// keys the way the YAML spells them and kind's example where the operator is.
func decodeProblems(err error, kind string, value func(key string) string) []string {
	out, durations := durationProblems(err)
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "*"))
		if line == "" || strings.HasPrefix(line, "decoding failed") {
			continue
		}
		if m := invalidKeys.FindStringSubmatch(line); m != nil {
			for _, k := range strings.Split(m[2], ", ") {
				key := k
				if prefix := yamlKey(m[1]); prefix != "" {
					key = prefix + "." + k
				}
				out = append(out, fmt.Sprintf("%s: unknown key; remove it or check its spelling against %s", key, Example(kind)))
			}
			continue
		}
		if m := badValue.FindStringSubmatch(line); m != nil {
			key := yamlKey(m[1])
			if durations[key] {
				continue
			}
			out = append(out, fmt.Sprintf("%s: %q is invalid: wrong type or form (%s); see %s for its form", key, value(key), m[2], Example(kind)))
			continue
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

// ValidationError lists every problem found in a configuration.
type ValidationError struct {
	Source   string
	Problems []string
	// Nothing says what was left alone; "" is "nothing was changed on
	// the node" (a fleet file's says nothing was started).
	Nothing string
}

func (e *ValidationError) Error() string {
	src := e.Source
	if src == "" {
		src = "configuration"
	}
	nothing := e.Nothing
	if nothing == "" {
		nothing = "nothing was changed on the node"
	}
	return fmt.Sprintf("%s has %d problem(s); %s:\n  - %s",
		src, len(e.Problems), nothing, strings.Join(e.Problems, "\n  - "))
}
