package ufwfixture

// This file names the recorded ufw rulesets, kept as iptables-save wrote
// them in testdata/ and embedded.

import _ "embed"

// Save4 and Save6 are iptables-save and ip6tables-save of a ufw 0.36
// node (Debian 12, iptables 1.8.9 nf_tables) made with the real ufw in a
// namespace by the firewall package's TestKernelUfw (FW_UFW_SAVE=1):
// default deny incoming and routed; allow 22/tcp, 8000:8010/tcp, 60000:60010/udp; 7000/tcp from
// 198.18.0.3 and fd00:f0::3; limit 2222/tcp; deny 9000/tcp; route allow
// 8443/tcp. Restoring them reproduces ufw's chain layout where ufw itself is
// not installed.
//
//go:embed testdata/save4.rules
var Save4 string

//go:embed testdata/save6.rules
var Save6 string
