// Package bootpath is what a Debian node loads its firewall from at boot,
// read and changed under node.root so a committed flip survives a reboot:
// nftables.service's enablement links and the drop-in that keeps its stop
// from flushing the ruleset, the predecessor's loaders
// (netfilter-persistent, iptables-persistent, ufw's ENABLED=yes) and the
// boot file (/etc/nftables.conf) with the mesh's table. Every file and link
// it replaces goes through the custody store first, so it can be undone.
// It is not the commit (the activities order its steps, record them and
// turn a Refusal into the workflow's error), nor the mesh's table
// (firewall/flip derives it), and it never calls the host's systemctl.
package bootpath

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"

	"adoption/custody"
	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// Where a Debian node loads its firewall at boot (under node.root).
const (
	NftablesConf = "/etc/nftables.conf"
	UfwConf      = "/etc/ufw/ufw.conf"
	// DropIn replaces nftables.service's ExecStop (nft flush ruleset,
	// which would take Docker's rules with it on a restart).
	DropIn = "/etc/systemd/system/nftables.service.d/adoption.conf"
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

// dropIn is DropIn's content: a stop leaves the ruleset alone (the
// mesh's table stays in force until the next start replaces it, and
// Docker's rules are never flushed); start and reload load the boot file,
// which replaces only the tables it declares.
const dropIn = `# Written by adoption when the node's flip was committed: the unit's own
# ExecStop (nft flush ruleset) would take Docker's rules with the mesh's
# table. A stop leaves the ruleset as it is; a start or reload replaces the
# mesh's table only. The file this replaced (if any) is in adoption's
# custody store (node.state_dir).
[Service]
ExecStop=
`

var ufwEnabled = regexp.MustCompile(`(?m)^[ \t]*ENABLED[ \t]*=.*$`)

// Files is what the boot path needs of the custody store (custody.Store):
// every change goes through it, each path taken into custody first.
type Files interface {
	Inspect(path string) custody.FileState
	Take(path string) (custody.Record, error)
	Record(path string) (custody.Record, bool, error)
	Converge(path string, content []byte, mode os.FileMode, uid, gid int) error
	Link(path, target string) error
	Remove(path string) error
	Blob(sum string) ([]byte, error)
}

// Node is one node's boot path.
type Node struct {
	Name  string // node.name, for the messages
	Root  string // node.root ("" is /)
	Files Files
	// Ruleset lists the ruleset in force (the tables the flip keeps).
	Ruleset func() (*firewall.Ruleset, error)
	// EnableService is flip.enable_boot_service: the commit may enable
	// nftables.service and switch off the predecessor's loaders itself.
	EnableService bool
	// On is the node whose bridges tell Docker's rules from the
	// predecessor's (nil: by Docker's default names).
	On *firewall.Node
	// Then is what a refusal tells the operator to run once the cause is
	// fixed: "" is the commit's (adopt retry NODE, which resumes it); the
	// preview, which checks the same before anything changes, says to
	// preview again.
	Then string
}

// then is Then, or the commit's way on.
func (n Node) then() string {
	if n.Then != "" {
		return n.Then
	}
	return "adopt retry " + n.Name
}

// Refusal is a boot path the commit will not build on, saying what to do:
// retrying without a change on the node changes nothing. NoMesh: the flip
// record carries no mesh table to write.
type Refusal struct {
	Msg    string
	NoMesh bool
}

func (r *Refusal) Error() string { return r.Msg }

// Plan is what the commit changes so that the boot loads the mesh's
// table: a link that enables nftables.service (enable, to target), links
// that enable a predecessor's loader (disable).
type Plan struct {
	enable, target string
	disable        []string
}

// Check reads (under node.root, never through the host's systemctl)
// whether the node's boot would load the mesh's table, and what the
// commit must change so it does. It refuses, naming what to do, when a
// change is needed and flip.enable_boot_service does not allow it.
func (n Node) Check(plan *flip.RevertPlan) (*Plan, error) {
	refuse := func(format string, args ...any) (*Plan, error) {
		return nil, &Refusal{Msg: fmt.Sprintf(format, args...)}
	}
	root := "node.root"
	if n.Root != "" {
		root += " " + n.Root
	}
	if st := n.Files.Inspect(path.Join(unitDirs[0], nftablesUnit)); st.Link == "/dev/null" {
		return refuse("nftables.service is masked on node %s (%s links to /dev/null under %s): the node would boot with no firewall; run `systemctl unmask nftables` on the node, then %s", n.Name, path.Join(unitDirs[0], nftablesUnit), root, n.then())
	}
	unit := ""
	for _, d := range unitDirs {
		if st := n.Files.Inspect(path.Join(d, nftablesUnit)); st.Exists && st.Error == "" {
			unit = path.Join(d, nftablesUnit)
			break
		}
	}
	if unit == "" {
		return refuse("nftables.service is not installed on node %s (no unit file in %s under %s): nothing would load the mesh's table at boot; install the nftables package, then %s", n.Name, strings.Join(unitDirs, ", "), root, n.then())
	}
	p := &Plan{}
	if !n.unitEnabled(nftablesUnit) {
		link := path.Join(wantsDirs[0], nftablesUnit)
		if !n.EnableService {
			return refuse("nftables.service is not enabled on node %s (no %s under %s; a stock Debian 12 leaves it disabled): the node would boot with no firewall; run `systemctl enable nftables` on the node, or set flip.enable_boot_service: true in its configuration to have the commit enable it, then %s", n.Name, link, root, n.then())
		}
		// Debian's systemctl enable writes the unit's path under /lib.
		p.enable, p.target = link, unit
		if unit == "/usr/lib/systemd/system/"+nftablesUnit {
			p.target = "/lib/systemd/system/" + nftablesUnit
		}
	}
	if err := n.checkKeptTables(root, plan); err != nil {
		return nil, err
	}
	rules := []string{}
	for _, r := range persistentRules {
		if n.Files.Inspect(r).Exists {
			rules = append(rules, r)
		}
	}
	for _, u := range persistentUnits {
		links := n.unitLinks(u)
		if len(links) == 0 || len(rules) == 0 {
			continue
		}
		if !n.EnableService {
			return refuse("%s is enabled on node %s (%s under %s) and would load the predecessor's %s at boot over the mesh's table; run `systemctl disable %s` on the node, or set flip.enable_boot_service: true in its configuration to have the commit switch it off, then %s",
				u, n.Name, strings.Join(links, ", "), root, strings.Join(rules, " and "), strings.TrimSuffix(u, ".service"), n.then())
		}
		p.disable = append(p.disable, links...)
	}
	return p, nil
}

// checkKeptTables refuses when a table the flip keeps (a native
// predecessor's nat table) is in force but not declared in the boot file
// the commit builds on, or the flip keeps a predecessor's rule of a table
// iptables-nft shares (ufw's *nat section) that nothing loads at boot once
// ufw is off: the node would boot without it (flip.Unbooted).
func (n Node) checkKeptTables(root string, plan *flip.RevertPlan) error {
	found := ""
	if rec, ok, err := n.Files.Record(NftablesConf); err != nil {
		return err
	} else if ok && rec.Found && rec.Link == "" {
		b, err := n.Files.Blob(rec.SHA256)
		if err != nil {
			return fmt.Errorf("custody copy of %s: %w", NftablesConf, err)
		}
		found = string(b)
	} else if !ok && n.Root != "" {
		if st := n.Files.Inspect(NftablesConf); st.Exists {
			b, err := n.readBootFile(NftablesConf)
			if err != nil {
				return fmt.Errorf("read %s: %w", NftablesConf, err)
			}
			found = string(b)
		}
	}
	rs, err := n.Ruleset()
	if err != nil {
		return fmt.Errorf("list the ruleset to check the tables the flip keeps: %w", err)
	}
	missing, rules, err := flip.Unbooted(rs, found, plan, n.On)
	if err != nil {
		return &Refusal{Msg: err.Error()}
	}
	if len(rules) > 0 {
		return &Refusal{Msg: fmt.Sprintf("the flip keeps in force on node %s rules of the found firewall that nothing loads at boot once the commit switches ufw (and netfilter-persistent) off: %s; "+
			"the node would boot without them. Move each into a native table declared in %s under %s (for a DNAT: table ip NAME { chain prerouting { type nat hook prerouting priority dstnat; ... } }), "+
			"load it with nft -f, and delete the rule where it came from (ufw: its *nat or *raw section in /etc/ufw/before.rules, then ufw reload); or delete it if it is not needed; then %s",
			n.Name, strings.Join(rules, "; "), NftablesConf, root, n.then())}
	}
	if len(missing) == 0 {
		return nil
	}
	var names []string
	for _, t := range missing {
		names = append(names, "table "+t.Family+" "+t.Name)
	}
	return &Refusal{Msg: fmt.Sprintf("the flip keeps %s in force on node %s, but %s under %s does not declare it: the node would boot without it; add it to that file (nft list table FAMILY NAME gives it), then %s",
		strings.Join(names, ", "), n.Name, NftablesConf, root, n.then())}
}

// readBootFile reads a boot file under node.root, never through a link.
func (n Node) readBootFile(path string) ([]byte, error) {
	return custody.ReadFile(n.Root, path, custody.MaxFileSize)
}

// unitEnabled reports whether a link in one of wantsDirs enables unit.
func (n Node) unitEnabled(unit string) bool { return len(n.unitLinks(unit)) > 0 }

func (n Node) unitLinks(unit string) []string {
	var out []string
	for _, d := range wantsDirs {
		if st := n.Files.Inspect(path.Join(d, unit)); st.Exists {
			out = append(out, path.Join(d, unit))
		}
	}
	return out
}

// ApplyUnits makes the changes of p, each link taken into custody
// first, and writes DropIn. It reports each change done.
func (n Node) ApplyUnits(p *Plan, done func(string)) error {
	if p.enable != "" {
		if _, err := n.Files.Take(p.enable); err != nil {
			return fmt.Errorf("take custody of %s: %w", p.enable, err)
		}
		if err := n.Files.Link(p.enable, p.target); err != nil {
			return fmt.Errorf("enable nftables.service (%s -> %s): %w", p.enable, p.target, err)
		}
		done("enabled nftables.service (" + p.enable + ", in custody)")
	}
	for _, l := range p.disable {
		if _, err := n.Files.Take(l); err != nil {
			return fmt.Errorf("take custody of %s: %w", l, err)
		}
		if err := n.Files.Remove(l); err != nil {
			return fmt.Errorf("switch off %s (remove %s): %w", path.Base(l), l, err)
		}
		done("switched off " + path.Base(l) + " (removed " + l + ", in custody)")
	}
	if err := n.replaceBootFile(DropIn, []byte(dropIn), 0o644); err != nil {
		return err
	}
	done("wrote " + DropIn + " (nftables.service's stop no longer flushes the ruleset)")
	return nil
}

// WriteRuleset writes the flip's mesh table, after the tables the flip
// keeps from the found file, to NftablesConf (taken into custody
// first). Idempotent: custody keeps the first record (what the
// predecessor had), and the file is derived from it again.
func (n Node) WriteRuleset(rec *nodestate.FlipRecord, plan *flip.RevertPlan) ([]string, error) {
	if len(rec.Mesh) == 0 {
		return nil, &Refusal{Msg: fmt.Sprintf("flip %s's record carries no mesh ruleset (written by an older agent): cannot write %s; the flip stays confirmed and in force until it is committed by hand", rec.ID, NftablesConf), NoMesh: true}
	}
	spec, err := RecordSpec(rec)
	if err != nil {
		return nil, err
	}
	found, err := n.Files.Take(NftablesConf)
	if err != nil {
		return nil, fmt.Errorf("take custody of %s: %w", NftablesConf, err)
	}
	was := ""
	if found.Found && found.Link == "" {
		b, err := n.Files.Blob(found.SHA256)
		if err != nil {
			return nil, fmt.Errorf("custody copy of %s: %w", NftablesConf, err)
		}
		was = string(b)
	}
	rs, err := n.Ruleset()
	if err != nil {
		return nil, fmt.Errorf("list the ruleset for the tables the flip keeps: %w", err)
	}
	text, notes, err := flip.BootFile(spec, fmt.Sprintf("Written by adoption when node %s's flip %s was committed: the mesh's own table,\n"+
		"loaded at boot by nftables.service, after the tables the flip kept. It never flushes the ruleset,\n"+
		"so a reload leaves Docker's rules alone. The file this replaced is in adoption's custody store (node.state_dir).", spec.Node, rec.ID), was, plan, rs)
	if err != nil {
		return nil, &Refusal{Msg: fmt.Sprintf("flip %s: the boot-time ruleset: %v", rec.ID, err)}
	}
	uid, gid := found.UID, found.GID
	if !found.Found {
		uid, gid = 0, 0
	}
	return notes, n.Files.Converge(NftablesConf, []byte(text), fileMode(found.Mode, 0o755), uid, gid)
}

// RecordSpec is the mesh's spec the flip record carries (flip.EffectiveSpec).
func RecordSpec(rec *nodestate.FlipRecord) (flip.MeshSpec, error) {
	var spec flip.MeshSpec
	if err := json.Unmarshal(rec.Mesh, &spec); err != nil {
		return spec, fmt.Errorf("flip %s: mesh ruleset in the record unreadable: %w", rec.ID, err)
	}
	return spec, nil
}

// DisableUfw sets ENABLED=no in UfwConf (taken into custody first,
// every other byte kept); a node without the file has nothing to switch
// off. It reports whether it changed anything.
func (n Node) DisableUfw() (bool, error) {
	ufw := n.Files.Inspect(UfwConf)
	if ufw.Error != "" {
		return false, fmt.Errorf("read %s: %s", UfwConf, ufw.Error)
	}
	if !ufw.Exists {
		return false, nil // no ufw: nothing loads the predecessor at boot that way
	}
	found, err := n.Files.Take(UfwConf)
	if err != nil {
		return false, fmt.Errorf("take custody of %s: %w", UfwConf, err)
	}
	// From the custody copy, so a retried commit writes the same bytes.
	was, err := n.Files.Blob(found.SHA256)
	if err != nil {
		return false, fmt.Errorf("custody copy of %s: %w", UfwConf, err)
	}
	return true, n.Files.Converge(UfwConf, UfwDisabled(was), fileMode(found.Mode, 0o644), found.UID, found.GID)
}

// replaceBootFile takes path into custody, then writes content there with
// the found file's mode and owner (mode def when nothing was found).
func (n Node) replaceBootFile(path string, content []byte, def os.FileMode) error {
	found, err := n.Files.Take(path)
	if err != nil {
		return fmt.Errorf("take custody of %s: %w", path, err)
	}
	uid, gid := found.UID, found.GID
	if !found.Found {
		uid, gid = 0, 0
	}
	return n.Files.Converge(path, content, fileMode(found.Mode, def), uid, gid)
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
