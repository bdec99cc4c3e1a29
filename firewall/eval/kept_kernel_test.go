package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/internal/fwtest"
)

// TestKernelKeptListing: an Inspector with a Kept listing answers a
// listing from the kept one only while the kernel holds that ruleset. A
// second listing with nothing changed is the kept one; after a commit, in
// another namespace with a ruleset of the same generation, after an ipset
// changed (no commit), and for a ruleset with a set the packet path fills
// (flags dynamic, add @set), it is listed anew, and each listing equals
// one made without a Kept.
func TestKernelKeptListing(t *testing.T) {
	n := fwtest.NewNamedNet(t, "kept-", "kp", "1e")
	fwtest.RequireTools(t, "nft", "iptables-nft", "ipset")
	rules := func(comment string) string {
		return `table inet f {
	set allowed { type ipv4_addr; flags interval; elements = { 198.18.0.0/24 } }
	chain input {
		type filter hook input priority filter; policy drop;
		ip saddr @allowed tcp dport 22 accept comment "` + comment + `"
	}
}`
	}
	n.Nft(t, rules("node"))
	fwtest.Run(t, rules("peer"), "ip", "netns", "exec", n.Peer, "nft", "-f", "-")
	kept := &nft.Kept{}
	node := Inspector{Netns: n.Path(n.Node), Kept: kept}
	list := func(in Inspector, when string) *firewall.Ruleset {
		t.Helper()
		rs, err := in.Ruleset()
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		fresh, err := Inspector{Netns: in.Netns}.Ruleset()
		if err != nil {
			t.Fatalf("%s, listed anew: %v", when, err)
		}
		if got, want := marshal(t, rs), marshal(t, fresh); got != want {
			t.Fatalf("%s: the listing through the Kept is not the kernel's ruleset:\n got %s\nwant %s", when, got, want)
		}
		return rs
	}
	first := list(node, "first listing")
	if again := list(node, "nothing changed"); again != first || kept.Hits() != 1 {
		t.Fatalf("nothing changed: the listing was made anew (%d listings answered from the Kept), want the kept one", kept.Hits())
	}

	n.Nft(t, "add rule inet f input tcp dport 443 accept comment \"added\"\n")
	if rs := list(node, "after a commit"); rs == first || !strings.Contains(marshal(t, rs), `"added"`) {
		t.Fatalf("after a commit: the kept listing was given (%d answered)", kept.Hits())
	}
	hits := kept.Hits()

	// The peer's ruleset is brought to the node's generation: only the
	// namespace tells their listings apart.
	for i := 0; i < 20 && generation(t, n.Path(n.Peer)) < generation(t, n.Path(n.Node)); i++ {
		fwtest.Run(t, fmt.Sprintf("add chain inet f pad%d\n", i), "ip", "netns", "exec", n.Peer, "nft", "-f", "-")
	}
	if g, w := generation(t, n.Path(n.Peer)), generation(t, n.Path(n.Node)); g != w {
		t.Fatalf("the peer's ruleset is at generation %d, the node's at %d: want them alike", g, w)
	}
	peer := Inspector{Netns: n.Path(n.Peer), Kept: kept}
	if rs := list(peer, "another namespace"); !strings.Contains(marshal(t, rs), `"peer"`) || kept.Hits() != hits {
		t.Fatalf("another namespace: the node's kept listing was given")
	}
	list(peer, "another namespace, again")
	if kept.Hits() != hits+1 {
		t.Fatalf("another namespace, nothing changed: %d answered, want %d", kept.Hits(), hits+1)
	}
	hits = kept.Hits()

	// An ipset changes without a commit.
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ipset", "create", "kept-src", "hash:net")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables-nft", "-A", "INPUT", "-m", "set", "--match-set", "kept-src", "src", "-j", "ACCEPT")
	list(node, "an ipset matched")
	list(node, "an ipset matched, again")
	if kept.Hits() != hits+1 {
		t.Fatalf("an ipset matched, nothing changed: %d answered, want %d", kept.Hits(), hits+1)
	}
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ipset", "add", "kept-src", "203.0.113.0/24")
	if rs := list(node, "an ipset changed"); !strings.Contains(marshal(t, rs), "203.0.113.0/24") {
		t.Fatalf("an ipset changed: the listing does not hold its new member")
	}
	hits = kept.Hits()

	// A set the packet path fills is never kept.
	n.Nft(t, `table inet seen {
	set peers { type ipv4_addr; flags dynamic; }
	chain input {
		type filter hook input priority filter; policy accept;
		add @peers { ip saddr }
	}
}`)
	list(node, "a dynamic set")
	list(node, "a dynamic set, again")
	if kept.Hits() != hits {
		t.Fatalf("a ruleset with a dynamic set was answered from the Kept (%d answered, want %d)", kept.Hits(), hits)
	}
}

// generation is the ruleset generation of the namespace at path.
func generation(t *testing.T, path string) uint32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nc, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(f.Fd())})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	g, err := nft.Generation(nc)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
