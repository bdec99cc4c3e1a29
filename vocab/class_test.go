package vocab

import (
	"slices"
	"testing"
)

// A region reads back as it is spelled, names one region per family it
// can be, and is refused with the notation when it is no region.
func TestParseRegionRoundTrips(t *testing.T) {
	for _, s := range []string{"ip udp to 239.255.255.250 dport 1900", "ip6 icmpv6 type 133 to ff02::2", "ip icmp type 13-255 to node",
		"ip udp to 224.0.0.0-224.0.0.250 sport 67 dport 68", "ip6 proto other", "ip6 icmp"} {
		cs, err := ParseRegion(s)
		if err != nil || len(cs) != 1 || cs[0].Spelling() != s {
			t.Errorf("%q: %+v, %v", s, cs, err)
		}
	}
	if cs, _ := ParseClass("echo-request"); !slices.Equal(cs, []string{"ip icmp type 8", "ip6 icmpv6 type 128"}) {
		t.Errorf("the old name echo-request: %v", cs)
	}
	for _, bad := range []string{"ping", "icmp type 300", "ip6 udp to 10.0.0.1", "esp dport 1"} {
		if _, err := ParseClass(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
