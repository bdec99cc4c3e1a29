// This file holds what keeps a committed flip in force beyond the running
// kernel: the boot-time ruleset file (Debian's nftables.service loads
// /etc/nftables.conf at boot) and the reassertion of the mesh's table when
// something (a stray `ufw enable`, an `nft flush ruleset`) removed it.

package flip

import (
	"fmt"
	"strings"

	"github.com/google/nftables"

	"adoption/firewall"
)

// BootRuleset is the content of the boot-time ruleset file for spec: the
// mesh's table only, loaded by `nft -f`. It declares, deletes and
// redeclares the table so that loading it twice (a `systemctl reload
// nftables`) replaces the table in one transaction without touching any
// other table (Docker's, at reload time), which a `flush ruleset` would.
func BootRuleset(spec MeshSpec, why string) (string, error) {
	text, _, err := BootFile(spec, why, "", nil, nil)
	return text, err
}

// BootFile is the boot-time ruleset file for the flip of p with spec, on a
// node whose boot file was found (the custody copy of /etc/nftables.conf,
// "" for none): what BootRuleset writes, after the tables the flip keeps
// that found declared (its defines too; without the filter base chains
// the commit deletes, see keptFromBootFile), of those that are in force in inForce
// (the ruleset listed at commit; nil: every one found declares). It never
// flushes the ruleset. notes names what of found is not carried; an
// include in found is refused.
func BootFile(spec MeshSpec, why, found string, p *RevertPlan, inForce *firewall.Ruleset) (string, []string, error) {
	d, err := Derive(spec)
	if err != nil {
		return "", nil, err
	}
	var kept string
	var notes []string
	if p != nil {
		if kept, notes, err = keptFromBootFile(found, p, inForce); err != nil {
			return "", nil, err
		}
	}
	var b strings.Builder
	b.WriteString("#!/usr/sbin/nft -f\n")
	for _, line := range strings.Split(why, "\n") {
		b.WriteString("# " + line + "\n")
	}
	b.WriteString(kept)
	if kept != "" {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "table inet %s {}\ndelete table inet %s\n", firewall.MeshTable, firewall.MeshTable)
	b.WriteString(d.Text())
	return b.String(), notes, nil
}

// Reassert puts the mesh's table for spec back when it is missing, in one
// batch, and reports whether it did. A table that is there is left as it is
// (its rules are the mesh's to own; a hand edit inside it is drift, not a
// removal).
func (f *Flipper) Reassert(spec MeshSpec) (bool, error) {
	d, err := Derive(spec)
	if err != nil {
		return false, err
	}
	s, err := f.m.Session()
	if err != nil {
		return false, err
	}
	defer s.Close()
	gen, rs, err := s.Snapshot()
	if err != nil {
		return false, err
	}
	for i := range rs.Tables {
		if firewall.TableOwner(&rs.Tables[i]).Owner == firewall.OwnedByMesh {
			return false, nil
		}
	}
	if _, err := s.Commit(gen, func(c *nftables.Conn) { d.queue(c) }); err != nil {
		return false, fmt.Errorf("reasserting table inet %s on node %s: %w", firewall.MeshTable, spec.Node, err)
	}
	return true, nil
}
