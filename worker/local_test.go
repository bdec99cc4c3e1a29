package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adoption/config"
	"adoption/failpoint"
)

// TestStartChecks: the custody key is made once (0600), a configuration
// readable by others is warned about, and a production build says loudly
// that it ignores ADOPT_FAILPOINTS.
func TestStartChecks(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfgPath := filepath.Join(dir, "n1.yaml")
	if err := os.WriteFile(cfgPath, []byte("node: {name: n1, root: "+dir+", state_dir: "+state+"}\nauthority: {unsigned: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(failpoint.EnvVar, "probe")
	var log bytes.Buffer
	if err := startChecks(cfg, cfgPath, slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(state, "custody.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("custody key: %v %v", fi, err)
	}
	if !strings.Contains(log.String(), "readable or writable by other users") || !strings.Contains(log.String(), "chmod 600 "+cfgPath) {
		t.Errorf("no warning about a configuration readable by others:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "UNSIGNED requests") || !strings.Contains(log.String(), "anyone with access to the Temporal namespace") {
		t.Errorf("an unsigned node is not said loudly:\n%s", log.String())
	}
	ignored := strings.Contains(log.String(), "production build") && strings.Contains(log.String(), "IGNORED")
	if ignored == failpoint.Enabled {
		t.Errorf("failpoints enabled=%v, log says ignored=%v:\n%s", failpoint.Enabled, ignored, log.String())
	}
	log.Reset()
	if err := os.Chmod(cfgPath, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := startChecks(cfg, cfgPath, slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "other users") {
		t.Errorf("a 0600 configuration was warned about:\n%s", log.String())
	}
	// A node that lists an operator says nothing of unsigned requests, and
	// prunes the records of expired intents.
	nonces := filepath.Join(state, "intents")
	if err := os.MkdirAll(nonces, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nonces, "00112233445566778899aabbccddeeff.json"), []byte(`{"expires":"2020-01-01T00:00:00Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Authority = config.Authority{Operators: config.KeyLines{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHuPfRsd33kNfAfcDQP0vip5/aOR4qj7YTiAsVhmNJQf alice@laptop"}}
	log.Reset()
	if err := startChecks(cfg, cfgPath, slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "UNSIGNED") {
		t.Errorf("a node with operators says it is unsigned:\n%s", log.String())
	}
	if entries, _ := os.ReadDir(nonces); len(entries) != 0 {
		t.Errorf("an expired intent's record was kept: %v", entries)
	}
}
