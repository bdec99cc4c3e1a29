// This file holds the listing kept for the next one: a whole ruleset, with
// the namespace, generation and ipsets it was read at, given again while
// the kernel holds that very ruleset.

package nft

import (
	"fmt"
	"maps"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// Kept keeps the last whole listing read through it. The kernel counts
// every commit to a namespace's ruleset (the generation, NFT_MSG_GETGEN):
// while the namespace (by its cookie, never reused while the system runs)
// and its generation are those of the kept listing, and its ipsets (which
// no commit changes) are equal to the kept ones, a new listing would
// decode the same ruleset, and the kept one is given instead. A listing
// whose content the kernel changes between commits (a set flagged dynamic
// or with timeouts, a rule that adds to a set) or that is partly unlisted
// (an error) is never kept. Its zero value keeps nothing yet; it is safe
// for concurrent use.
//
// A kept ruleset is shared by everyone it is given to: it is read-only,
// as every listing is to its readers (a reader that changes a ruleset
// works on a copy, as flip's split does).
type Kept struct {
	mu   sync.Mutex
	at   listedAt
	rs   *firewall.Ruleset
	hits int
}

// listedAt is what a whole listing was read at.
type listedAt struct {
	ns     uint64 // the namespace's cookie
	gen    uint32
	ipsets map[uint16]*IPSet
}

// List is List answered from k when it can be (Kept), keeping a new
// listing that can be kept.
func (k *Kept) List(c *nftables.Conn) (*firewall.Ruleset, error) { return listSome(c, nil, k) }

// Hits is how many listings k answered.
func (k *Kept) Hits() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hits
}

// match is the kept listing when at is where it was read; nil otherwise.
func (k *Kept) match(at listedAt) *firewall.Ruleset {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.rs == nil || k.at.ns != at.ns || k.at.gen != at.gen || !maps.EqualFunc(k.at.ipsets, at.ipsets, sameIPSet) {
		return nil
	}
	k.hits++
	return k.rs
}

// keep keeps rs, read at at.
func (k *Kept) keep(at listedAt, rs *firewall.Ruleset) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.at, k.rs = at, rs
}

func sameIPSet(a, b *IPSet) bool {
	if a.Name != b.Name || a.Type != b.Type || a.Family != b.Family || a.Unknown != b.Unknown || len(a.Prefixes) != len(b.Prefixes) {
		return false
	}
	for i := range a.Prefixes {
		if a.Prefixes[i] != b.Prefixes[i] {
			return false
		}
	}
	return true
}

// kernelChanges reports whether the kernel changes s's elements between
// commits: from the packet path (dynamic) or as they expire (timeouts).
func kernelChanges(s *nftables.Set) bool { return s.Dynamic || s.HasTimeout }

// updatesSet reports whether r adds to or updates a set from the packet
// path (a dynset: "add @s", "update @s", a meter).
func updatesSet(r *nftables.Rule) bool {
	for _, e := range r.Exprs {
		if _, ok := e.(*expr.Dynset); ok {
			return true
		}
	}
	return false
}

// netnsCookie is the cookie of the namespace nc's socket is in: the
// kernel never gives one to two namespaces while it runs.
func netnsCookie(nc *netlink.Conn) (uint64, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cookie uint64
	var sockErr error
	if err := raw.Control(func(fd uintptr) {
		cookie, sockErr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	}); err != nil {
		return 0, err
	}
	if sockErr != nil {
		return 0, fmt.Errorf("reading the namespace's cookie: %w", sockErr)
	}
	return cookie, nil
}
