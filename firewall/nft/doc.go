// Package nft is the firewall's kernel I/O: dialling into a node's network
// namespace, listing the ruleset and decoding it into the firewall model
// (native expressions, xtables compat matches, sets and maps), naming the
// kind of the found firewall, and the netlink transaction every write goes
// through. It decides nothing about what the rules let through (that is
// firewall/eval) or who owns them (firewall).
package nft
