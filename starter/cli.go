// The CLI's shared state: the configuration, the Temporal client once
// dialled, and the Web UI link of a node's workflow.
package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"adoption/config"
	"adoption/connect"
	"adoption/output"
	"adoption/workflows"
)

// cli holds what every command needs: the global flags, the configuration
// and, once dialled, the Temporal client.
type cli struct {
	cfgPath string
	uiURL   string
	// asJSON: the output (-o, --json) is json or jsonl.
	asJSON bool
	// out are the output flags both binaries share (package output).
	out    output.Flags
	stdout io.Writer
	stderr io.Writer
	flags  connect.Flags
	// accept bounds how long a request waits to be accepted by the node's
	// workflow (--accept-timeout).
	accept time.Duration
	// sign is how requests are signed (sign.go).
	sign signFlags

	cfg    *config.Config
	target *target // where the client points and why, once dialled
	c      client.Client
}

// configGiven says whether the operator named a node configuration at all.
func (x *cli) configGiven() bool {
	return config.Given(x.cfgPath)
}

// load reads the node's configuration, for the commands that act on a node
// (start needs the node's whole plan).
func (x *cli) load() error {
	if x.cfg != nil {
		return nil
	}
	if !x.configGiven() {
		return usagef("%s", config.NoConfiguration(config.NodeFile))
	}
	cfg, err := config.Load(x.cfgPath)
	if err != nil {
		return err
	}
	x.cfg = cfg
	return nil
}

// temporalConfig is the node configuration's temporal.* for the commands
// that only talk to Temporal: they need nothing of a node, so a missing
// node.name is no reason to refuse. No configuration at all is fine too:
// the client settings then come from flags, TEMPORAL_* and profiles.
func (x *cli) temporalConfig() (*config.Temporal, error) {
	if x.cfg != nil {
		return &x.cfg.Temporal, nil
	}
	if !x.configGiven() {
		return nil, nil
	}
	cfg, err := config.Load(x.cfgPath)
	var ve *config.ValidationError
	if errors.As(err, &ve) && onlyNodeNameMissing(ve) {
		cfg, err = config.LoadWith(x.cfgPath, map[string]string{"node.name": "operator", "authority.unsigned": "true"})
	}
	if err != nil {
		return nil, err
	}
	return &cfg.Temporal, nil
}

// onlyNodeNameMissing: a file of temporal.* only lacks a node's name and
// its authority, which talking to Temporal does not need.
func onlyNodeNameMissing(ve *config.ValidationError) bool {
	name := false
	for _, p := range ve.Problems {
		switch {
		case strings.HasPrefix(p, "node.name:"):
			name = true
		case strings.HasPrefix(p, "authority.operators:"):
		default:
			return false
		}
	}
	return name
}

// dial connects once, with the settings layered as documented in
// clientopts.go.
func (x *cli) dial() error {
	if x.c != nil {
		return nil
	}
	tc, err := x.temporalConfig()
	if err != nil {
		return err
	}
	return x.dialWith(tc, "temporal.* of "+orDefault(x.cfgPath))
}

func (x *cli) dialWith(tc *config.Temporal, base string) error {
	if x.c != nil {
		return nil
	}
	t, err := resolveTarget(x.flags, tc, base)
	if err != nil {
		return err
	}
	c, err := t.dial()
	if err != nil {
		return err
	}
	x.target, x.c = t, c
	return nil
}

func (x *cli) link(node string) string {
	ui := x.uiURL
	if ui == "" {
		ui = envOr("ADOPT_UI", defaultUI)
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(ui, "/"),
		url.PathEscape(x.namespace()), url.PathEscape(workflows.WorkflowID(node)))
}

// namespace is the namespace in force: the one the client was dialled with.
func (x *cli) namespace() string {
	if x.target != nil {
		return x.target.Namespace
	}
	if x.flags.Namespace != "" {
		return x.flags.Namespace
	}
	if x.cfg != nil && x.cfg.Temporal.Namespace != "" {
		return x.cfg.Temporal.Namespace
	}
	return "default"
}
