// The CLI's shared state: the configuration, the Temporal client once
// dialled, and the Web UI link of a node's workflow.
package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"adoption/config"
	"adoption/connect"
	"adoption/workflows"

	"go.temporal.io/sdk/client"
)

// cli holds what every command needs: the configuration and, once dialled,
// the Temporal client.
type cli struct {
	cfgPath string
	uiURL   string
	stdout  io.Writer
	cfg     *config.Config
	c       client.Client
}

func (x *cli) load() error {
	if x.cfg != nil {
		return nil
	}
	cfg, err := config.Load(x.cfgPath)
	if err != nil {
		return err
	}
	x.cfg = cfg
	return nil
}

// loadTemporalOnly loads the config for commands that only talk to Temporal:
// they need temporal.* and nothing of a node, so a missing node.name is no
// reason to refuse (the operator's machine may have no node config).
func (x *cli) dial() error {
	if x.c != nil {
		return nil
	}
	cfg, err := config.Load(x.cfgPath)
	var ve *config.ValidationError
	if errors.As(err, &ve) && onlyNodeNameMissing(ve) {
		cfg, err = config.LoadWith(x.cfgPath, map[string]string{"node.name": "operator"})
	}
	if err != nil {
		return err
	}
	c, err := connect.Dial(cfg.Temporal, nil)
	if err != nil {
		return err
	}
	x.c = c
	return nil
}

func onlyNodeNameMissing(ve *config.ValidationError) bool {
	return len(ve.Problems) == 1 && strings.HasPrefix(ve.Problems[0], "node.name:")
}

func (x *cli) link(node string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(x.uiURL, "/"),
		url.PathEscape(x.namespace()), url.PathEscape(workflows.WorkflowID(node)))
}

func (x *cli) namespace() string {
	if x.cfg != nil {
		return x.cfg.Temporal.Namespace
	}
	return "default"
}
