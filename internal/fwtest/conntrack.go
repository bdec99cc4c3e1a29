// This file empties a namespace's connection tracking table, so that a
// probe sent after another that was answered is judged as new, not as a
// conversation conntrack already knows (a source port picked again).

package fwtest

import (
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// FlushConntrack deletes every conntrack entry of namespace ns (ctnetlink
// IPCTNL_MSG_CT_DELETE without a tuple).
func FlushConntrack(t *testing.T, ns string) {
	t.Helper()
	const ctDelete = 2 // IPCTNL_MSG_CT_DELETE
	err := InNetns(ns, func() error {
		c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Execute(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_CTNETLINK<<8 | ctDelete), Flags: netlink.Request | netlink.Acknowledge},
			// nfgenmsg: every family, version 0, resource 0.
			Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
		})
		return err
	})
	if err != nil {
		t.Fatalf("flushing conntrack in %s: %v", ns, err)
	}
}
