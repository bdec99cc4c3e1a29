package fake

import (
	"errors"
	"testing"

	"adoption/firewall/flip"
)

// The flipper records each call and answers with what it was given.
func TestFlipperRecords(t *testing.T) {
	f := &Flipper{Neutralised: []flip.RuleRef{{Handle: 7}}, Saved: "table ip filter {}"}
	p, err := f.Flip(flip.MeshSpec{Node: "n1"}, "found", "derived")
	if err != nil || p.Node != "n1" || p.FoundFingerprint != "found" || len(p.Neutralised) != 1 {
		t.Fatalf("flip: %+v %v", p, err)
	}
	if err := f.Revert(p); err != nil || len(f.Reverts) != 1 {
		t.Fatalf("revert: %v, %d recorded", err, len(f.Reverts))
	}
	if saved, err := f.Commit(p); err != nil || saved != "table ip filter {}" || f.Commits != 1 {
		t.Fatalf("commit: %q %v", saved, err)
	}
	f.FlipErr = errors.New("busy")
	if _, err := f.Flip(flip.MeshSpec{Node: "n1"}, "a", "b"); err == nil || len(f.Flips) != 2 {
		t.Fatalf("a failing flip: %v, %d recorded", err, len(f.Flips))
	}
}

func TestServicesPublishOnlyWhenAsked(t *testing.T) {
	r := Services([]string{"web", "db"}, 31000)
	if len(r.Containers) != 2 || r.Containers[1].Ports[0].HostPort != 31001 || r.Containers[0].Mounts[0].Name != "web-data" {
		t.Fatalf("published: %+v", r.Containers)
	}
	if r := Services([]string{"web"}, 0); len(r.Containers[0].Ports) != 0 {
		t.Fatalf("unpublished: %+v", r.Containers)
	}
}
