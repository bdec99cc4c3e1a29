// Package firewall is the model of the node's found firewall and who owns
// each part of it: tables, chains and rules decoded into a small condition
// model, the one ownership model (predecessor, foreign, mesh, shared), what
// a container bridge is, what the evaluator knows of the node besides its
// ruleset, and the model rendered for people and hashed.
//
// It is not the kernel I/O (firewall/nft), the evaluator (firewall/eval),
// the marked rules (firewall/marks) or the flip (firewall/flip): every one of
// them imports this package, never the other way. docs/firewall.md says how
// the parts fit.
package firewall
