package eval

import (
	"testing"

	"adoption/internal/fwtest"
)

// BenchmarkOpenPorts evaluates the bench's control-node-shaped node as the
// probe does (fwtest's testdata/dnat/control-node.json; go run ./bench
// -probe-fixture writes it anew); BenchmarkOpenPortsOnUfwDocker does the
// kernel tests' ufw-docker node. A tool for profiling (-cpuprofile,
// -memprofile); no figure here is asserted, `make bench` reports the
// probe's.
func BenchmarkOpenPorts(b *testing.B) {
	rs, node := fwtest.LoadFixture(b, "control-node")
	b.ReportAllocs()
	for b.Loop() {
		OpenPortsOn(rs, node)
	}
}
