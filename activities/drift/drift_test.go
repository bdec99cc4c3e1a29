package drift

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/fake"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// Unit tests of the drift check on stand-ins of the node's parts: custody
// as a map, the records as values, the firewall as activities/fake's.

// files is custody as the check reads it: what each path holds now and
// what was recorded for it.
type files struct {
	now     map[string]custody.FileState
	records map[string]custody.Record
}

func (f files) Inspect(p string) custody.FileState {
	if s, ok := f.now[p]; ok {
		return s
	}
	return custody.FileState{Path: p}
}

func (f files) Record(p string) (custody.Record, bool, error) {
	r, ok := f.records[p]
	return r, ok, nil
}

// records are the node's cutover records and its firewall baseline.
type records struct {
	cutovers map[string]nodestate.CutoverRecord
	baseline *nodestate.Baseline
}

func (r records) Cutovers() (map[string]nodestate.CutoverRecord, error) { return r.cutovers, nil }
func (r records) Baseline() (nodestate.Baseline, bool, error) {
	if r.baseline == nil {
		return nodestate.Baseline{}, false, nil
	}
	return *r.baseline, true, nil
}

// brokenFirewall fails every listing: a check that must not list the
// firewall shows it by not failing.
type brokenFirewall struct{}

func (brokenFirewall) Ruleset() (*firewall.Ruleset, error) { return nil, errors.New("netlink: no") }

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// state is a file holding content, its plain hash and a keyed digest
// standing for the node's own.
func state(p, content string) custody.FileState {
	return custody.FileState{Path: p, Exists: true, Size: int64(len(content)), SHA256: sum(content), Digest: "hmac-sha256:" + sum("key"+content)}
}

const (
	appEnv  = "/srv/app/app.env"
	hostsTo = "/etc/hosts.allow"
)

// auth is a node's authority declaring appEnv (module app, whose mesh
// content is "mesh\n") and hostsTo (a node file).
func auth() *authority.Authority {
	return &authority.Authority{
		Plan: config.Plan{Node: "n1",
			Modules:   []config.ModulePlan{{Name: "app", Files: []config.FilePlan{{Path: appEnv, SHA256: "hmac-sha256:mesh"}}}},
			NodeFiles: []config.FilePlan{{Path: hostsTo}}},
		Contents: map[string][]byte{"hmac-sha256:mesh": []byte("mesh\n")},
	}
}

// found is a check on a node whose appEnv was found holding "found\n"
// and holds now; hostsTo was found absent.
func found() (Check, files) {
	f := files{
		now: map[string]custody.FileState{appEnv: state(appEnv, "found\n")},
		records: map[string]custody.Record{
			appEnv:  {FileState: state(appEnv, "found\n"), Found: true},
			hostsTo: {FileState: custody.FileState{Path: hostsTo}},
		},
	}
	return Check{Node: "n1", Files: f, Records: records{}, Firewall: fake.Firewall{}}, f
}

// noPlainHash fails when an item names content by its plain hash: that
// never leaves the node.
func noPlainHash(t *testing.T, items []nodewire.DriftItem, contents ...string) {
	t.Helper()
	b, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range contents {
		if strings.Contains(string(b), sum(c)) {
			t.Fatalf("an item names %q by its plain hash: %s", c, b)
		}
	}
}

// Of: a file as recorded is no drift; an edit, a file appearing where
// none was found, and a file gone are, each named by keyed digest.
func TestOfFiles(t *testing.T) {
	c, f := found()
	in := nodewire.DriftInput{Custody: []custody.Record{{FileState: custody.FileState{Path: appEnv}}, {FileState: custody.FileState{Path: hostsTo}}}}
	res, err := c.Of(auth(), in)
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("nothing changed: %+v %v", res, err)
	}

	f.now[appEnv] = state(appEnv, "edited\n")
	f.now[hostsTo] = state(hostsTo, "ALL: ALL\n")
	res, err = c.Of(auth(), in)
	if err != nil || len(res.Items) != 2 {
		t.Fatalf("two changed: %+v %v", res, err)
	}
	if it := res.Items[0]; it.Path != appEnv || it.Recorded != state(appEnv, "found\n").Digest || it.Now != state(appEnv, "edited\n").Digest {
		t.Fatalf("the edit: %+v", it)
	}
	if it := res.Items[1]; it.Path != hostsTo || it.Recorded != "absent" || it.Now != state(hostsTo, "ALL: ALL\n").Digest {
		t.Fatalf("a file where none was found: %+v", it)
	}
	noPlainHash(t, res.Items, "found\n", "edited\n", "ALL: ALL\n")

	delete(f.now, appEnv)
	res, err = c.Of(auth(), nodewire.DriftInput{Custody: in.Custody[:1]})
	if err != nil || len(res.Items) != 1 || res.Items[0].Now != "absent" {
		t.Fatalf("a file gone: %+v %v", res, err)
	}
	f.now[appEnv] = custody.FileState{Path: appEnv, Error: "permission denied"}
	res, err = c.Of(auth(), nodewire.DriftInput{Custody: in.Custody[:1]})
	if err != nil || len(res.Items) != 1 || res.Items[0].Now != "unreadable" || res.Items[0].What != "permission denied" {
		t.Fatalf("an unreadable file: %+v %v", res, err)
	}
}

// Of refuses, before it reads anything, a path the node does not declare;
// a declared path the node holds no record of is reported, not guessed.
func TestOfUndeclaredAndUnrecorded(t *testing.T) {
	c, f := found()
	_, err := c.Of(auth(), nodewire.DriftInput{Custody: []custody.Record{{FileState: custody.FileState{Path: appEnv}}, {FileState: custody.FileState{Path: "/etc/shadow"}}}})
	if err == nil || !strings.Contains(err.Error(), "/etc/shadow") {
		t.Fatalf("an undeclared path: %v", err)
	}
	delete(f.records, appEnv)
	res, err := c.Of(auth(), nodewire.DriftInput{Custody: []custody.Record{{FileState: custody.FileState{Path: appEnv}}}})
	if err != nil || len(res.Items) != 1 || res.Items[0].Recorded != "unknown" || !strings.Contains(res.Items[0].What, "no custody record on node n1") {
		t.Fatalf("no record: %+v %v", res, err)
	}
}

// Of: a record naming the plan's digest of the mesh's content is compared
// with the node's own copy of that content; a digest the node has no
// content for is refused for good; a record's plain hash is never taken as
// the baseline (it would let a request ask what a file holds).
func TestOfMeshContent(t *testing.T) {
	c, f := found()
	mesh := []custody.Record{{FileState: custody.FileState{Path: appEnv, SHA256: "hmac-sha256:mesh"}}}
	res, err := c.Of(auth(), nodewire.DriftInput{Custody: mesh})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("the found content where the mesh's should be: %+v %v", res, err)
	}
	f.now[appEnv] = state(appEnv, "mesh\n")
	if res, err = c.Of(auth(), nodewire.DriftInput{Custody: mesh}); err != nil || len(res.Items) != 0 {
		t.Fatalf("the mesh's content: %+v %v", res, err)
	}

	guess := []custody.Record{{FileState: custody.FileState{Path: appEnv, SHA256: sum("mesh\n")}}}
	if res, err = c.Of(auth(), nodewire.DriftInput{Custody: guess}); err != nil || len(res.Items) != 1 || res.Items[0].Recorded != state(appEnv, "found\n").Digest {
		t.Fatalf("a request's plain hash is compared with, not the node's record: %+v %v", res, err)
	}

	a := auth()
	delete(a.Contents, "hmac-sha256:mesh")
	_, err = c.Of(a, nodewire.DriftInput{Custody: mesh})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != nodewire.ErrMissingContent || !ae.NonRetryable() {
		t.Fatalf("no content for the digest: %v", err)
	}
}

// Of lists the firewall only when asked, and reports a fingerprint other
// than the request's.
func TestOfFirewall(t *testing.T) {
	c, _ := found()
	c.Firewall = brokenFirewall{}
	if _, err := c.Of(auth(), nodewire.DriftInput{}); err != nil {
		t.Fatalf("no fingerprint asked, yet the firewall was listed: %v", err)
	}
	if _, err := c.Of(auth(), nodewire.DriftInput{Firewall: "x"}); err == nil || !strings.Contains(err.Error(), "list the found firewall") {
		t.Fatalf("a listing that fails: %v", err)
	}
	c.Firewall = fake.Firewall{Rules: ruleset(22)}
	now := flip.FoundFingerprint(ruleset(22))
	if res, err := c.Of(auth(), nodewire.DriftInput{Firewall: now}); err != nil || len(res.Items) != 0 {
		t.Fatalf("the same rules: %+v %v", res, err)
	}
	res, err := c.Of(auth(), nodewire.DriftInput{Firewall: flip.FoundFingerprint(ruleset(2222))})
	if err != nil || len(res.Items) != 1 || res.Items[0].Kind != "firewall" || res.Items[0].Now != now {
		t.Fatalf("other rules: %+v %v", res, err)
	}
}

// Now: a declared file against the node's own record; a file a cutover
// converged against what the cutover wrote (unless rolled back); a path
// never taken is not looked at; the firewall against the baseline.
func TestNow(t *testing.T) {
	c, f := found()
	base := nodestate.Baseline{Firewall: flip.FoundFingerprint(&firewall.Ruleset{})}
	c.Records = records{baseline: &base}
	items, converged, fw, err := c.Now(auth())
	if err != nil || len(items) != 0 || len(converged) != 0 || fw != base.Firewall {
		t.Fatalf("nothing changed: %+v %v %q %v", items, converged, fw, err)
	}

	c.Records = records{baseline: &base, cutovers: map[string]nodestate.CutoverRecord{
		"app": {Module: "app", State: "confirmed", Files: map[string]string{appEnv: sum("mesh\n")}},
	}}
	items, converged, _, err = c.Now(auth())
	if err != nil || len(items) != 1 || converged[appEnv] != "app" || !strings.Contains(items[0].What, "module app's cutover") {
		t.Fatalf("the found content where the cutover wrote the mesh's: %+v %v %v", items, converged, err)
	}
	noPlainHash(t, items, "mesh\n", "found\n")
	f.now[appEnv] = state(appEnv, "mesh\n")
	if items, _, _, err = c.Now(auth()); err != nil || len(items) != 0 {
		t.Fatalf("what the cutover wrote: %+v %v", items, err)
	}

	c.Records = records{baseline: &base, cutovers: map[string]nodestate.CutoverRecord{
		"app": {Module: "app", State: nodestate.CutoverRolledBack, Files: map[string]string{appEnv: sum("mesh\n")}},
	}}
	items, converged, _, err = c.Now(auth())
	if err != nil || len(items) != 1 || len(converged) != 0 || items[0].Recorded != state(appEnv, "found\n").Digest {
		t.Fatalf("a rolled-back cutover's content is drift from the found file: %+v %v %v", items, converged, err)
	}

	delete(f.records, appEnv) // never taken
	if items, _, _, err = c.Now(auth()); err != nil || len(items) != 0 {
		t.Fatalf("a path never taken: %+v %v", items, err)
	}
}

// Now: no baseline recorded is reported with what to do; other rules than
// the baseline's are drift.
func TestNowFirewall(t *testing.T) {
	c, _ := found()
	c.Firewall = fake.Firewall{Rules: ruleset(22)}
	items, _, fw, err := c.Now(auth())
	if err != nil || len(items) != 1 || items[0].Recorded != "none" || !strings.Contains(items[0].What, "adopt drift accept n1") {
		t.Fatalf("no baseline: %+v %v", items, err)
	}
	c.Records = records{baseline: &nodestate.Baseline{Firewall: fw}}
	if items, _, _, err = c.Now(auth()); err != nil || len(items) != 0 {
		t.Fatalf("the baseline's rules: %+v %v", items, err)
	}
	c.Firewall = fake.Firewall{Rules: ruleset(2222)}
	if items, _, _, err = c.Now(auth()); err != nil || len(items) != 1 || items[0].Recorded != fw || items[0].Now == fw {
		t.Fatalf("other rules: %+v %v", items, err)
	}
}

// ruleset is a found firewall whose input chain accepts tcp to port.
func ruleset(port uint16) *firewall.Ruleset {
	return &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "filter", Chains: []firewall.Chain{{
		Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter",
		Rules: []firewall.Rule{{Conds: []firewall.Cond{{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: port, To: port}}}},
			Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}},
	}}}}}
}
