package activities

// This file holds the commit's boot persistence: a converged node must boot
// into the mesh's ruleset, not back into its predecessor's, and not into no
// firewall at all. On Debian, nftables.service loads /etc/nftables.conf at
// boot (only when it is enabled: it is not on a stock Debian 12), ufw.service
// loads ufw's rules when /etc/ufw/ufw.conf says ENABLED=yes, and
// netfilter-persistent loads /etc/iptables/rules.v4 and rules.v6 when it is
// enabled. Every file and link the commit replaces is taken into custody
// (byte-exact, a link as a link) first, so it can be undone.

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"

	"adoption/custody"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// Where a Debian node loads its firewall at boot (under node.root).
const (
	BootNftablesConf = "/etc/nftables.conf"
	BootUfwConf      = "/etc/ufw/ufw.conf"
	// BootDropIn replaces nftables.service's ExecStop (nft flush ruleset,
	// which would take Docker's rules with it on a restart).
	BootDropIn = "/etc/systemd/system/nftables.service.d/adoption.conf"
)

const nftablesUnit = "nftables.service"

// unitDirs are where systemd finds a unit file; wantsDirs where a link
// enables one at boot (nftables.service is WantedBy sysinit.target,
// netfilter-persistent by multi-user.target; either counts).
var (
	unitDirs  = []string{"/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}
	wantsDirs = []string{"/etc/systemd/system/sysinit.target.wants", "/etc/systemd/system/multi-user.target.wants"}
	// persistentUnits load iptables rules files at boot.
	persistentUnits = []string{"netfilter-persistent.service", "iptables-persistent.service"}
	persistentRules = []string{"/etc/iptables/rules.v4", "/etc/iptables/rules.v6"}
)

// bootDropIn is BootDropIn's content: a stop leaves the ruleset alone (the
// mesh's table stays in force until the next start replaces it, and
// Docker's rules are never flushed); start and reload load the boot file,
// which replaces only the tables it declares.
const bootDropIn = `# Written by adoption when the node's flip was committed: the unit's own
# ExecStop (nft flush ruleset) would take Docker's rules with the mesh's
# table. A stop leaves the ruleset as it is; a start or reload replaces the
# mesh's table only. The file this replaced (if any) is in adoption's
# custody store (node.state_dir).
[Service]
ExecStop=
`

var ufwEnabled = regexp.MustCompile(`(?m)^[ \t]*ENABLED[ \t]*=.*$`)

// bootPlan is what the commit changes so that the boot loads the mesh's
// table: a link that enables nftables.service (enable, to target), links
// that enable a predecessor's loader (disable).
type bootPlan struct {
	enable, target string
	disable        []string
}

// checkBoot reads (under node.root, never through the host's systemctl)
// whether the node's boot would load the mesh's table, and what the
// commit must change so it does. It refuses, naming what to do, when a
// change is needed and flip.enable_boot_service does not allow it.
func (a *Activities) checkBoot(auth *Authority, plan *flip.RevertPlan) (*bootPlan, error) {
	refuse := func(format string, args ...any) (*bootPlan, error) {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrBootPath, nil)
	}
	root := "node.root"
	if a.Root != "" {
		root += " " + a.Root
	}
	if st := a.Files.Inspect(path.Join(unitDirs[0], nftablesUnit)); st.Link == "/dev/null" {
		return refuse("nftables.service is masked on node %s (%s links to /dev/null under %s): the node would boot with no firewall; run `systemctl unmask nftables` on the node, then adopt retry %s", auth.Plan.Node, path.Join(unitDirs[0], nftablesUnit), root, auth.Plan.Node)
	}
	unit := ""
	for _, d := range unitDirs {
		if st := a.Files.Inspect(path.Join(d, nftablesUnit)); st.Exists && st.Error == "" {
			unit = path.Join(d, nftablesUnit)
			break
		}
	}
	if unit == "" {
		return refuse("nftables.service is not installed on node %s (no unit file in %s under %s): nothing would load the mesh's table at boot; install the nftables package, then adopt retry %s", auth.Plan.Node, strings.Join(unitDirs, ", "), root, auth.Plan.Node)
	}
	p := &bootPlan{}
	if !a.unitEnabled(nftablesUnit) {
		link := path.Join(wantsDirs[0], nftablesUnit)
		if !auth.EnableBootService {
			return refuse("nftables.service is not enabled on node %s (no %s under %s; a stock Debian 12 leaves it disabled): the node would boot with no firewall; run `systemctl enable nftables` on the node, or set flip.enable_boot_service: true in its configuration to have the commit enable it, then adopt retry %s", auth.Plan.Node, link, root, auth.Plan.Node)
		}
		// Debian's systemctl enable writes the unit's path under /lib.
		p.enable, p.target = link, unit
		if unit == "/usr/lib/systemd/system/"+nftablesUnit {
			p.target = "/lib/systemd/system/" + nftablesUnit
		}
	}
	if err := a.checkKeptTables(auth, root, plan); err != nil {
		return nil, err
	}
	rules := []string{}
	for _, r := range persistentRules {
		if a.Files.Inspect(r).Exists {
			rules = append(rules, r)
		}
	}
	for _, u := range persistentUnits {
		links := a.unitLinks(u)
		if len(links) == 0 || len(rules) == 0 {
			continue
		}
		if !auth.EnableBootService {
			return refuse("%s is enabled on node %s (%s under %s) and would load the predecessor's %s at boot over the mesh's table; run `systemctl disable %s` on the node, or set flip.enable_boot_service: true in its configuration to have the commit switch it off, then adopt retry %s",
				u, auth.Plan.Node, strings.Join(links, ", "), root, strings.Join(rules, " and "), strings.TrimSuffix(u, ".service"), auth.Plan.Node)
		}
		p.disable = append(p.disable, links...)
	}
	return p, nil
}

// checkKeptTables refuses when a table the flip keeps (a native
// predecessor's nat table) is in force but not declared in the boot file
// the commit builds on: the node would boot without it.
func (a *Activities) checkKeptTables(auth *Authority, root string, plan *flip.RevertPlan) error {
	found := ""
	if rec, ok, err := a.Files.Record(BootNftablesConf); err != nil {
		return err
	} else if ok && rec.Found && rec.Link == "" {
		b, err := a.Files.Blob(rec.SHA256)
		if err != nil {
			return fmt.Errorf("custody copy of %s: %w", BootNftablesConf, err)
		}
		found = string(b)
	} else if !ok && a.Root != "" {
		if st := a.Files.Inspect(BootNftablesConf); st.Exists {
			b, err := a.readBootFile(BootNftablesConf)
			if err != nil {
				return fmt.Errorf("read %s: %w", BootNftablesConf, err)
			}
			found = string(b)
		}
	}
	rs, err := a.Firewall.Ruleset()
	if err != nil {
		return fmt.Errorf("list the ruleset to check the tables the flip keeps: %w", err)
	}
	missing, err := flip.Unbooted(rs, found, plan)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrBootPath, nil)
	}
	if len(missing) == 0 {
		return nil
	}
	var names []string
	for _, t := range missing {
		names = append(names, "table "+t.Family+" "+t.Name)
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the flip keeps %s in force on node %s, but %s under %s does not declare it: the node would boot without it; add it to that file (nft list table FAMILY NAME gives it), then adopt retry %s",
		strings.Join(names, ", "), auth.Plan.Node, BootNftablesConf, root, auth.Plan.Node), ErrBootPath, nil)
}

// readBootFile reads a boot file under node.root, never through a link.
func (a *Activities) readBootFile(path string) ([]byte, error) {
	return custody.ReadFile(a.Root, path, custody.MaxFileSize)
}

// unitEnabled reports whether a link in one of wantsDirs enables unit.
func (a *Activities) unitEnabled(unit string) bool { return len(a.unitLinks(unit)) > 0 }

func (a *Activities) unitLinks(unit string) []string {
	var out []string
	for _, d := range wantsDirs {
		if st := a.Files.Inspect(path.Join(d, unit)); st.Exists {
			out = append(out, path.Join(d, unit))
		}
	}
	return out
}

// applyBootUnits makes the changes of p, each link taken into custody
// first, and writes BootDropIn. It reports each change done.
func (a *Activities) applyBootUnits(p *bootPlan, done func(string)) error {
	if p.enable != "" {
		if _, err := a.Files.Take(p.enable); err != nil {
			return fmt.Errorf("take custody of %s: %w", p.enable, err)
		}
		if err := a.Files.Link(p.enable, p.target); err != nil {
			return fmt.Errorf("enable nftables.service (%s -> %s): %w", p.enable, p.target, err)
		}
		done("enabled nftables.service (" + p.enable + ", in custody)")
	}
	for _, l := range p.disable {
		if _, err := a.Files.Take(l); err != nil {
			return fmt.Errorf("take custody of %s: %w", l, err)
		}
		if err := a.Files.Remove(l); err != nil {
			return fmt.Errorf("switch off %s (remove %s): %w", path.Base(l), l, err)
		}
		done("switched off " + path.Base(l) + " (removed " + l + ", in custody)")
	}
	if err := a.replaceBootFile(BootDropIn, []byte(bootDropIn), 0o644); err != nil {
		return err
	}
	done("wrote " + BootDropIn + " (nftables.service's stop no longer flushes the ruleset)")
	return nil
}

// writeBootRuleset writes the flip's mesh table, after the tables the flip
// keeps from the found file, to BootNftablesConf (taken into custody
// first). Idempotent: custody keeps the first record (what the
// predecessor had), and the file is derived from it again.
func (a *Activities) writeBootRuleset(rec *nodestate.FlipRecord, plan *flip.RevertPlan) ([]string, error) {
	if len(rec.Mesh) == 0 {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s's record carries no mesh ruleset (written by an older agent): cannot write %s; the flip stays confirmed and in force until it is committed by hand", rec.ID, BootNftablesConf), ErrFlipNotConfirmed, nil)
	}
	spec, err := recordSpec(rec)
	if err != nil {
		return nil, err
	}
	found, err := a.Files.Take(BootNftablesConf)
	if err != nil {
		return nil, fmt.Errorf("take custody of %s: %w", BootNftablesConf, err)
	}
	was := ""
	if found.Found && found.Link == "" {
		b, err := a.Files.Blob(found.SHA256)
		if err != nil {
			return nil, fmt.Errorf("custody copy of %s: %w", BootNftablesConf, err)
		}
		was = string(b)
	}
	rs, err := a.Firewall.Ruleset()
	if err != nil {
		return nil, fmt.Errorf("list the ruleset for the tables the flip keeps: %w", err)
	}
	text, notes, err := flip.BootFile(spec, fmt.Sprintf("Written by adoption when node %s's flip %s was committed: the mesh's own table,\n"+
		"loaded at boot by nftables.service, after the tables the flip kept. It never flushes the ruleset,\n"+
		"so a reload leaves Docker's rules alone. The file this replaced is in adoption's custody store (node.state_dir).", spec.Node, rec.ID), was, plan, rs)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s: the boot-time ruleset: %v", rec.ID, err), ErrBootPath, nil)
	}
	uid, gid := found.UID, found.GID
	if !found.Found {
		uid, gid = 0, 0
	}
	return notes, a.Files.Converge(BootNftablesConf, []byte(text), fileMode(found.Mode, 0o755), uid, gid)
}

func recordSpec(rec *nodestate.FlipRecord) (flip.MeshSpec, error) {
	var spec flip.MeshSpec
	if err := json.Unmarshal(rec.Mesh, &spec); err != nil {
		return spec, fmt.Errorf("flip %s: mesh ruleset in the record unreadable: %w", rec.ID, err)
	}
	return spec, nil
}

// disableUfw sets ENABLED=no in BootUfwConf (taken into custody first,
// every other byte kept); a node without the file has nothing to switch
// off. It reports whether it changed anything.
func (a *Activities) disableUfw() (bool, error) {
	ufw := a.Files.Inspect(BootUfwConf)
	if ufw.Error != "" {
		return false, fmt.Errorf("read %s: %s", BootUfwConf, ufw.Error)
	}
	if !ufw.Exists {
		return false, nil // no ufw: nothing loads the predecessor at boot that way
	}
	found, err := a.Files.Take(BootUfwConf)
	if err != nil {
		return false, fmt.Errorf("take custody of %s: %w", BootUfwConf, err)
	}
	// From the custody copy, so a retried commit writes the same bytes.
	was, err := a.Files.Blob(found.SHA256)
	if err != nil {
		return false, fmt.Errorf("custody copy of %s: %w", BootUfwConf, err)
	}
	return true, a.Files.Converge(BootUfwConf, UfwDisabled(was), fileMode(found.Mode, 0o644), found.UID, found.GID)
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
