package nft_test

// Root tests of the commit's batch against the kernel, in a namespace of
// their own: a batch larger than a netlink socket's default send buffer.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"adoption/firewall/nft"
	"adoption/internal/fwtest"
)

// bigBatch queues a chain of rules in table t whose messages together take
// more than twice bytes: each rule's message is over 100 bytes (its
// comment alone is 48).
func bigBatch(t *nftables.Table, chain string, bytes int) (func(c *nftables.Conn), int) {
	rules := 2*bytes/100 + 1
	return func(c *nftables.Conn) {
		ch := c.AddChain(&nftables.Chain{Table: t, Name: chain})
		for i := range rules {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch,
				Exprs:    []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}},
				UserData: userdata.AppendString(nil, userdata.TypeComment, fmt.Sprintf("a rule of a batch too big for one default send %05d", i)),
			})
		}
	}, rules
}

// A flip of a large ruleset is one batch larger than the socket's default
// send buffer (wmem_default): the batch goes through whole, and a batch as
// large with one bad message is refused whole, as a small one is.
func TestKernelCommitBatchBeyondSendBuffer(t *testing.T) {
	n := fwtest.NewNamedNet(t, "tx-", "tx", "b7")
	wmem, err := strconv.Atoi(strings.TrimSpace(fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "cat", "/proc/sys/net/core/wmem_default")))
	if err != nil {
		t.Fatal(err)
	}
	n.Nft(t, "table inet big {}")
	c, closeNS, err := nft.Dial(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	defer closeNS()
	s, err := nft.OpenSession("", c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: "big"}
	count := func(chain string) int {
		t.Helper()
		rules, err := c.GetRules(table, &nftables.Chain{Table: table, Name: chain})
		if err != nil {
			t.Fatal(err)
		}
		return len(rules)
	}

	build, want := bigBatch(table, "whole", wmem)
	gen, _, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	echoes, err := s.Commit(gen, build)
	if err != nil {
		t.Fatalf("a batch of %d rules, over twice wmem_default (%d bytes): %v", want, wmem, err)
	}
	if len(echoes) != want || count("whole") != want {
		t.Fatalf("after the batch: %d echoes, %d rules listed; want %d", len(echoes), count("whole"), want)
	}
	before := n.Listing(t) // the chain the refused batch adds is listed even when empty

	build, _ = bigBatch(table, "refused", wmem)
	gen, _, err = s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Commit(gen, func(c *nftables.Conn) {
		build(c)
		_ = c.DelRule(&nftables.Rule{Table: table, Chain: &nftables.Chain{Table: table, Name: "whole"}, Handle: 1 << 40})
	})
	if !errors.Is(err, unix.ENOENT) {
		t.Fatalf("a large batch ending in a delete of no rule: %v; want the kernel's ENOENT", err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("a refused batch changed the ruleset:\n%s", fwtest.Diff(before, after))
	}
}
