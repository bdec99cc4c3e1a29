// Package flip replaces the found firewall with the mesh's own table and
// keeps the way back: the ruleset derived from the plan, the preview of
// every opening's fate, the flip in one batch, revert, commit, the boot-time
// ruleset, and the fingerprint of the found firewall drift is measured
// against. Restrictions carried into the mesh's table belong here too. It
// does not place marks (firewall/marks) nor evaluate (firewall/eval).
package flip
