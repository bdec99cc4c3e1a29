package activities

// This file holds the commit's boot persistence: a converged node must boot
// into the mesh's ruleset, not back into its predecessor's. On Debian,
// nftables.service loads /etc/nftables.conf at boot and ufw.service loads
// ufw's rules when /etc/ufw/ufw.conf says ENABLED=yes. Both files are taken
// into custody (byte-exact, as found files are) before they are replaced,
// so the decision is recorded and can be undone by hand.

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"

	"go.temporal.io/sdk/temporal"

	"adoption/firewall/flip"
	"adoption/nodestate"
)

// Where a Debian node loads its firewall at boot (under node.root).
const (
	BootNftablesConf = "/etc/nftables.conf"
	BootUfwConf      = "/etc/ufw/ufw.conf"
)

var ufwEnabled = regexp.MustCompile(`(?m)^[ \t]*ENABLED[ \t]*=.*$`)

// persistBoot writes the flip's mesh table to BootNftablesConf and switches
// ufw's boot-time loader off, each file taken into custody first.
// Idempotent: a retried commit rewrites the same bytes, and custody keeps
// the first record (what the predecessor had).
func (a *Activities) persistBoot(rec *nodestate.FlipRecord) error {
	if len(rec.Mesh) == 0 {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s's record carries no mesh ruleset (written by an older agent): cannot write %s; the flip stays confirmed and in force until it is committed by hand", rec.ID, BootNftablesConf), ErrFlipNotConfirmed, nil)
	}
	var spec flip.MeshSpec
	if err := json.Unmarshal(rec.Mesh, &spec); err != nil {
		return fmt.Errorf("flip %s: mesh ruleset in the record unreadable: %w", rec.ID, err)
	}
	text, err := flip.BootRuleset(spec, fmt.Sprintf("Written by adoption when node %s's flip %s was committed: the mesh's own table,\n"+
		"loaded at boot by nftables.service. The file this replaced is in adoption's custody store (node.state_dir).", spec.Node, rec.ID))
	if err != nil {
		return fmt.Errorf("flip %s: derive the boot-time ruleset: %w", rec.ID, err)
	}
	if err := a.replaceBootFile(BootNftablesConf, []byte(text), 0o755); err != nil {
		return err
	}
	ufw := a.Files.Inspect(BootUfwConf)
	if ufw.Error != "" {
		return fmt.Errorf("read %s: %s", BootUfwConf, ufw.Error)
	}
	if !ufw.Exists {
		return nil // no ufw: nothing loads the predecessor at boot that way
	}
	found, err := a.Files.Take(BootUfwConf)
	if err != nil {
		return fmt.Errorf("take custody of %s: %w", BootUfwConf, err)
	}
	// From the custody copy, so a retried commit writes the same bytes.
	was, err := a.Files.Blob(found.SHA256)
	if err != nil {
		return fmt.Errorf("custody copy of %s: %w", BootUfwConf, err)
	}
	return a.Files.Converge(BootUfwConf, UfwDisabled(was), fileMode(found.Mode, 0o644), found.UID, found.GID)
}

// replaceBootFile takes path into custody, then writes content there with
// the found file's mode and owner (mode def when nothing was found).
func (a *Activities) replaceBootFile(path string, content []byte, def os.FileMode) error {
	found, err := a.Files.Take(path)
	if err != nil {
		return fmt.Errorf("take custody of %s: %w", path, err)
	}
	uid, gid := found.UID, found.GID
	if !found.Found {
		uid, gid = 0, 0
	}
	return a.Files.Converge(path, content, fileMode(found.Mode, def), uid, gid)
}

// UfwDisabled is ufw.conf with ENABLED=no, every other byte as it was.
func UfwDisabled(conf []byte) []byte {
	if ufwEnabled.Match(conf) {
		return ufwEnabled.ReplaceAll(conf, []byte("ENABLED=no"))
	}
	out := append([]byte(nil), conf...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, "ENABLED=no\n"...)
}

func fileMode(s string, def os.FileMode) os.FileMode {
	if v, err := strconv.ParseUint(s, 8, 32); s != "" && err == nil {
		return os.FileMode(v)
	}
	return def
}
