package flip

// The preview of traffic classes on ufw's own layout (the bench's control
// node as the kernel lists it): ufw-not-local's rate-limited jump to
// ufw-logging-deny only logs, so its limit decides nothing.

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// Other protocols (ESP, GRE, SCTP, VRRP) and a DHCP server's broadcast pass ufw only in on
// lo (IPv4 and IPv6 alike): uncertain alike before and after the flip,
// which carries lo, so kept; the rate limit of ufw's logging is no
// restriction the flip would drop.
func TestPreviewUfwLoggingLimitIsNoRestriction(t *testing.T) {
	found, node := fwtest.LoadFixture(t, "control-node")
	pv := PreviewFlipOn(found, node, MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")})
	kept := map[string]bool{}
	for _, f := range pv.Fates {
		if f.Opening.Class == "" || f.Opening.Direction != firewall.HookInput {
			continue
		}
		if f.Fate != FateKept {
			t.Errorf("%s %s: %s (%s)", f.Opening.Family, classSpec(f.Opening), f.Fate, f.Reason)
		}
		kept[f.Opening.Family+" "+f.Opening.Class] = true
	}
	// Every other protocol (ESP, GRE, SCTP, VRRP alike) and a DHCP
	// server's broadcast, kept.
	for _, c := range []string{"ip ip proto other", "ip ip udp to 255.255.255.255 sport 68-65535 dport 0-20109", "ip6 ip6 proto other"} {
		if !kept[c] {
			t.Errorf("%s: no kept fate in %v", c, kept)
		}
	}
	for _, r := range pv.Reasons {
		if strings.Contains(r, "limit rate") {
			t.Errorf("a reason names ufw's logging limit: %s", r)
		}
	}
}
