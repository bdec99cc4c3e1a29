package main

// This file holds what the agent reads from its own node at start and at
// every request: the configuration file as the authority over requests
// (re-read each time, so an operator's edit applies at the next retry),
// the custody key, and the warnings an operator must see (a configuration
// readable by others, failpoints asked of a production build).

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/custody"
	"adoption/failpoint"
	"adoption/nodestate"
)

// localAuthority re-reads the node's configuration for each request.
func localAuthority(cfgPath string) func() (*authority.Authority, error) {
	return func() (*authority.Authority, error) {
		cfg, err := config.Load(cfgPath)
		if err != nil {
			return nil, err
		}
		return authority.FromConfig(cfg, configSource(cfgPath)), nil
	}
}

func configSource(cfgPath string) string {
	if cfgPath == "" {
		cfgPath = os.Getenv("ADOPT_CONFIG")
	}
	if cfgPath == "" {
		return "(defaults and ADOPT_* environment)"
	}
	return cfgPath
}

// startChecks runs once when the agent starts serving: the custody key
// exists (so the probe's hashes are keyed too), and what an operator must
// know is logged loudly.
func startChecks(cfg *config.Config, cfgPath string, logger *slog.Logger) error {
	if err := custody.New(cfg.Node.Root, cfg.Node.StateDir).EnsureKey(); err != nil {
		return fmt.Errorf("custody key under node.state_dir %s: %w", cfg.Node.StateDir, err)
	}
	if p := configSource(cfgPath); p != "" {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			logger.Warn("the node's configuration file is readable or writable by other users: it holds the declared files' content and decides what this agent does as root; run chmod 600 "+p,
				"file", p, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
		}
	}
	if ops, _ := cfg.Authority.Keys(); ops.Len() == 0 && cfg.Authority.Unsigned {
		logger.Error("authority.unsigned is true and authority.operators lists no key: this agent acts on UNSIGNED requests, so anyone with access to the Temporal namespace can make node " + cfg.Node.Name +
			" act (adopt, migrate, flip, release); list the operators' public keys in authority.operators and remove authority.unsigned")
	} else {
		logger.Info("requests must carry an intent signed by an operator's key", "operators", ops.Len(), "intents", authority.IntentsDir(cfg.Node.StateDir))
	}
	// The records of intents expired are no longer needed (their expiry
	// refuses them), but for operations with a way back not yet ended.
	if n, err := authority.PruneIntents(cfg.Node.StateDir, time.Now()); err != nil {
		logger.Warn("prune the records of expired intents", "error", err.Error())
	} else if n > 0 {
		logger.Info("pruned the records of expired intents", "removed", n)
	}
	// An adopted node whose owner record is gone serves no workflow: said
	// at start, with what root does, rather than at the first request.
	st := nodestate.New(cfg.Node.StateDir)
	if m, adopted, err := st.Adopted(); err == nil && adopted {
		if _, owned, err := st.Owner(); err == nil && !owned {
			logger.Error("node "+cfg.Node.Name+" is adopted but its owner record "+st.OwnerFile()+" is missing: it serves no workflow and refuses every request until root names it: adopt-worker own --config FILE --workflow ID",
				"adopted_at", m.AdoptedAt, "marker_workflow", m.Workflow)
		}
	}
	if v, set := os.LookupEnv(failpoint.EnvVar); set && !failpoint.Enabled {
		logger.Error(fmt.Sprintf("%s is set (%q) but this is a production build of adopt-worker: IGNORED, no failpoint is armed (failpoints exist only in builds with -tags %s)",
			failpoint.EnvVar, v, failpoint.Tag))
	}
	return nil
}
