// Package nodewire holds the values that cross Temporal between the
// workflows and the node's activities: requests, results, reports,
// briefings, the error types of refusals, and the names the workflows call
// the activities by. It does no I/O, so the workflows and the CLI read
// them without linking Docker's client, nftables or netlink; package
// activities (and activities/watch) run them on the node and name them by
// alias.
package nodewire
