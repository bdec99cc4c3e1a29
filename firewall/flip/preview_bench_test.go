package flip

// The preview of a flip on the bench's control-node-shaped node, as the
// agent's Preview activity makes it: a tool for profiling (-cpuprofile,
// -memprofile); no figure here is asserted, `make bench` reports the
// probe's and the preview's.

import (
	"os"
	"syscall"
	"testing"
	"time"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// BenchmarkPreviewControlNode previews the spec the workflow derives for
// the bench's plan (management port 22/tcp) on fwtest's control-node
// fixture (go run ./bench -probe-fixture writes it anew). Besides the
// time, it reports the process's CPU time per preview (cpu-ns/op), which
// other work on a busy machine changes less.
func BenchmarkPreviewControlNode(b *testing.B) {
	found, node := fwtest.LoadFixture(b, "control-node")
	benchPreview(b, found, node)
}

// BenchmarkPreviewFixture is BenchmarkPreviewControlNode on the fixture
// file ADOPT_PREVIEW_FIXTURE names: go run ./bench -probe-fixture F
// writes the control node's at -probe-scale times beside F (F-x10.json),
// too large to keep in the tree. Without it, skipped.
func BenchmarkPreviewFixture(b *testing.B) {
	file := os.Getenv("ADOPT_PREVIEW_FIXTURE")
	if file == "" {
		b.Skip("ADOPT_PREVIEW_FIXTURE names no fixture file")
	}
	found, node := fwtest.LoadFixtureFile(b, file)
	benchPreview(b, found, node)
}

// benchPreview previews the bench's spec on found and node, each loop.
func benchPreview(b *testing.B, found *firewall.Ruleset, node firewall.Node) {
	spec := MeshSpec{Node: "bnprobe", Input: allow(OwnerManagement, "22/tcp")}
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		PreviewFlipOn(found, node, spec)
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
