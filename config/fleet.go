package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// Fleet is a fleet file: how to reach Temporal and each node's own
// configuration file, the control node first.
type Fleet struct {
	Temporal Temporal `mapstructure:"temporal"`
	Name     string   `mapstructure:"name"`
	Nodes    []string `mapstructure:"nodes"` // paths of node configuration files, relative to the fleet file
	// WavesIn and MaxFailedIn are `waves:` and `max_failed:` as written
	// (counts or percentages); Waves is them resolved (waves.go), nil
	// without waves: one node at a time.
	WavesIn     []any  `mapstructure:"waves"`
	MaxFailedIn any    `mapstructure:"max_failed"`
	Waves       *Waves `mapstructure:"-"`
	// AskAfter is `ask_after:`: how long the fleet waits on nodes it
	// cannot see end before it first asks how their workflows stand
	// (CheckAskAfter); 0, DefaultAskAfter.
	AskAfter time.Duration `mapstructure:"ask_after"`
	// Loaded node configurations, in order.
	Configs []*Config `mapstructure:"-"`
}

// FleetWorkflowID is the workflow ID of fleet name: the one workflow a
// node whose authority.fleet names it lets read its plan.
func FleetWorkflowID(name string) string { return "fleet/" + name }

// LoadFleet reads a fleet file and every node configuration it names,
// reporting every problem of every file at once.
func LoadFleet(path string) (*Fleet, error) {
	v := viper.New()
	v.SetDefault("temporal.address", "127.0.0.1:7233")
	v.SetDefault("temporal.namespace", "default")
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("fleet file %s: %w", path, err)
	}
	var f Fleet
	var problems []string
	if err := v.Unmarshal(&f, func(dc *mapstructure.DecoderConfig) {
		dc.ErrorUnused = true
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(durationHook, tlsOffHook)
	}); err != nil {
		problems = append(problems, decodeProblems(err, FleetFile, func(k string) string { return fmt.Sprint(v.Get(k)) })...)
	}
	// The fleet's temporal section dials the same cluster as a node's: it
	// is held to the same rules (a TLS key alone, a bad address...).
	tv := &validator{}
	tv.temporal(f.Temporal)
	problems = append(problems, tv.problems...)
	if p := f.Temporal.loadCodecKey(); p != "" {
		problems = append(problems, p)
	}
	if !ValidName(f.Name) {
		problems = append(problems, fmt.Sprintf("name: %q is invalid: a fleet name must be %s", f.Name, NameRule))
	}
	if len(f.Nodes) == 0 {
		problems = append(problems, "nodes: the fleet lists no node configuration files")
	}
	for i, n := range f.Nodes {
		p := n
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(path), p)
		}
		c, err := Load(p)
		if err != nil {
			problems = append(problems, fmt.Sprintf("nodes[%d] (%s): %v", i, n, err))
			continue
		}
		f.Configs = append(f.Configs, c)
	}
	// The control node is always alone: the waves share the others.
	w, wp := ResolveWaves(f.WavesIn, f.MaxFailedIn, max(len(f.Nodes)-1, 0))
	f.Waves, problems = w, append(problems, wp...)
	if f.AskAfter != 0 {
		if err := CheckAskAfter(f.AskAfter); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if f.Temporal.CodecKeyFile == "" && len(f.Configs) > 0 {
		// The nodes' key, when they share one, encrypts the fleet's
		// requests too: one secret per fleet, named once per node file.
		shared := f.Configs[0].Temporal
		for _, c := range f.Configs[1:] {
			if c.Temporal.CodecKeyFile != shared.CodecKeyFile {
				shared = Temporal{}
			}
		}
		f.Temporal.CodecKeyFile, f.Temporal.Key, f.Temporal.OlderKeys = shared.CodecKeyFile, shared.Key, shared.OlderKeys
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Source: path, Problems: problems, Nothing: "nothing was started or sent"}
	}
	return &f, nil
}

// NodeNames lists the fleet's nodes in order.
func (f *Fleet) NodeNames() string {
	names := make([]string, 0, len(f.Configs))
	for _, c := range f.Configs {
		names = append(names, c.Node.Name)
	}
	return strings.Join(names, ", ")
}

// Declaring are the configurations of the fleet's nodes that declare
// module (modules[].name), in the fleet's order. None is an error that
// names the key and the modules each node declares.
func (f *Fleet) Declaring(module string) ([]*Config, error) {
	var out []*Config
	var have []string
	for _, c := range f.Configs {
		var names []string
		for _, m := range c.Modules {
			names = append(names, m.Name)
			if m.Name == module {
				out = append(out, c)
			}
		}
		have = append(have, fmt.Sprintf("%s [%s]", c.Node.Name, strings.Join(names, ", ")))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("modules: no node of fleet %s declares module %q (modules[].name of each node's configuration: %s); name a module one of them declares", f.Name, module, strings.Join(have, "; "))
	}
	return out, nil
}

// DefaultAskAfter is a fleet's ask_after when the file gives none: the
// fleet's first ask round comes this long after it began to wait on nodes
// it cannot see end, and each round that asked someone puts the next twice
// as far, never more than MaxAskAfter apart. Its bounds are in Durations.
const DefaultAskAfter = time.Hour

// MaxAskAfter is ask_after's ceiling (Durations), the farthest apart two
// rounds come.
const MaxAskAfter = 24 * time.Hour

// CheckAskAfter checks a fleet's ask_after against its bounds (Durations).
func CheckAskAfter(d time.Duration) error {
	if why := durationKey("ask_after").check(d); why != "" {
		return fmt.Errorf("ask_after: %s: give %s", d, why)
	}
	return nil
}
