package firewall

import "testing"

// BenchmarkOpenPorts evaluates the fixtures of testdata/dnat as the probe
// does: control-node is the bench's control-node-shaped node (go run
// ./bench -probe-fixture writes it), ufw-docker the kernel tests' ufw-docker
// node. A tool for profiling (-cpuprofile, -memprofile); no figure here is
// asserted, `make bench` reports the probe's.
func BenchmarkOpenPorts(b *testing.B) {
	for _, name := range []string{"control-node", "ufw-docker"} {
		rs, node := loadFixture(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				OpenPortsOn(rs, node)
			}
		})
	}
}
