// This file holds the found firewalls the kernel tests load: ufw's own
// layout (RestoreUfw, from internal/ufwfixture) and the ufw-docker
// arrangement with Docker's rules (UfwDockerRules, UfwDockerRules6).

package fwtest

import (
	"testing"

	"adoption/internal/testenv"
	"adoption/internal/ufwfixture"
)

// restoreUfw loads the ufw layout that TestKernelUfwLayout restores: ufw's
// own chains without needing ufw installed, in well under a second.
func RestoreUfw(t *testing.T, n *TestNet) {
	t.Helper()
	testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
	Run(t, ufwfixture.Save4, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	Run(t, ufwfixture.Save6, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
}

// ufwDockerRules is what Docker writes for a container publishing 18080,
// 18081, 18082, 18083/tcp, 18053/udp and 19100/tcp (in nat POSTROUTING,
// its network's masquerade and, per published port, the hairpin masquerade
// that lets the container reach itself through the host port), with the
// ufw-docker arrangement in DOCKER-USER and these routed rules in
// ufw-user-forward:
// 8080 to anyone, 8081 only from 198.18.0.3, 8053/udp to anyone, and the
// published host port 18083 by conntrack's original port (how a mark keys
// a forward rule). 8082 and 9100 are not routed: published but closed.
const UfwDockerRules = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 8080 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 8081 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 8082 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 8083 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p udp -m udp --dport 8053 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 9100 -j MASQUERADE
-A DOCKER -i docker0 -j RETURN
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18080 -j DNAT --to-destination 172.17.0.2:8080
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18081 -j DNAT --to-destination 172.17.0.2:8081
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18082 -j DNAT --to-destination 172.17.0.2:8082
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18083 -j DNAT --to-destination 172.17.0.2:8083
-A DOCKER ! -i docker0 -p udp -m udp --dport 18053 -j DNAT --to-destination 172.17.0.2:8053
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 19100 -j DNAT --to-destination 172.17.0.2:9100
COMMIT
*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:DOCKER - [0:0]
:DOCKER-ISOLATION-STAGE-1 - [0:0]
:DOCKER-ISOLATION-STAGE-2 - [0:0]
:DOCKER-USER - [0:0]
:ufw-user-forward - [0:0]
:ufw-docker-logging-deny - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A FORWARD -j DOCKER-USER
-A FORWARD -j DOCKER-ISOLATION-STAGE-1
-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -o docker0 -j DOCKER
-A FORWARD -i docker0 ! -o docker0 -j ACCEPT
-A FORWARD -i docker0 -o docker0 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 8080 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 8081 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 8082 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 8083 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p udp -m udp --dport 8053 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 9100 -j ACCEPT
-A DOCKER-ISOLATION-STAGE-1 -i docker0 ! -o docker0 -j DOCKER-ISOLATION-STAGE-2
-A DOCKER-ISOLATION-STAGE-1 -j RETURN
-A DOCKER-ISOLATION-STAGE-2 -o docker0 -j DROP
-A DOCKER-ISOLATION-STAGE-2 -j RETURN
-A DOCKER-USER -j ufw-user-forward
-A DOCKER-USER -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN
-A DOCKER-USER -s 10.0.0.0/8 -j RETURN
-A DOCKER-USER -s 172.16.0.0/12 -j RETURN
-A DOCKER-USER -s 192.168.0.0/16 -j RETURN
-A DOCKER-USER -p udp -m udp --sport 53 --dport 1024:65535 -j RETURN
-A DOCKER-USER -d 192.168.0.0/16 -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j ufw-docker-logging-deny
-A DOCKER-USER -d 10.0.0.0/8 -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j ufw-docker-logging-deny
-A DOCKER-USER -d 172.16.0.0/12 -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j ufw-docker-logging-deny
-A DOCKER-USER -d 192.168.0.0/16 -p udp -m udp --dport 0:32767 -j ufw-docker-logging-deny
-A DOCKER-USER -d 10.0.0.0/8 -p udp -m udp --dport 0:32767 -j ufw-docker-logging-deny
-A DOCKER-USER -d 172.16.0.0/12 -p udp -m udp --dport 0:32767 -j ufw-docker-logging-deny
-A DOCKER-USER -j RETURN
-A ufw-docker-logging-deny -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW DOCKER BLOCK] "
-A ufw-docker-logging-deny -j DROP
-A ufw-user-forward -p tcp -m tcp --dport 8080 -j ACCEPT
-A ufw-user-forward -s 198.18.0.3/32 -p tcp -m tcp --dport 8081 -j ACCEPT
-A ufw-user-forward -p udp -m udp --dport 8053 -j ACCEPT
-A ufw-user-forward -p tcp -m conntrack --ctstate DNAT --ctorigdstport 18083 -j ACCEPT
COMMIT
`

// ufwDockerRules6 is the IPv6 side: Docker's DNAT into the container's
// ULA, ufw's routed rules deciding (the private-source exception of
// ufw-docker would let the test's ULA clients through, so it is left out).
const UfwDockerRules6 = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A POSTROUTING -s fd00:17::/64 ! -o docker0 -j MASQUERADE
-A POSTROUTING -s fd00:17::2/128 -d fd00:17::2/128 -p tcp -m tcp --dport 8080 -j MASQUERADE
-A POSTROUTING -s fd00:17::2/128 -d fd00:17::2/128 -p tcp -m tcp --dport 8082 -j MASQUERADE
-A DOCKER -i docker0 -j RETURN
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18080 -j DNAT --to-destination [fd00:17::2]:8080
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18082 -j DNAT --to-destination [fd00:17::2]:8082
COMMIT
*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:ufw6-user-forward - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p ipv6-icmp -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -i docker0 -j ACCEPT
-A FORWARD -j ufw6-user-forward
-A ufw6-user-forward -p tcp -m tcp --dport 8080 -j ACCEPT
COMMIT
`

// DockerChains adds, with iptables-nft, what dockerd adds at its start
// with no container running: its filter chains (DOCKER-USER returning),
// its jumps at the top of FORWARD, its nat chain reached for local
// destinations, and its network's masquerade.
func DockerChains(t *testing.T, n *TestNet) {
	t.Helper()
	for _, args := range [][]string{
		{"-N", "DOCKER"}, {"-N", "DOCKER-USER"}, {"-N", "DOCKER-FORWARD"},
		{"-A", "DOCKER-USER", "-j", "RETURN"},
		{"-A", "DOCKER-FORWARD", "-o", "docker0", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
		{"-A", "DOCKER-FORWARD", "-o", "docker0", "-j", "DOCKER"},
		{"-A", "DOCKER-FORWARD", "-i", "docker0", "-j", "ACCEPT"},
		{"-I", "FORWARD", "-j", "DOCKER-USER"},
		{"-I", "FORWARD", "2", "-j", "DOCKER-FORWARD"},
		{"-t", "nat", "-N", "DOCKER"},
		{"-t", "nat", "-A", "PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"},
		{"-t", "nat", "-A", "OUTPUT", "!", "-d", "127.0.0.0/8", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"},
		{"-t", "nat", "-A", "POSTROUTING", "-s", "172.17.0.0/16", "!", "-o", "docker0", "-j", "MASQUERADE"},
	} {
		Run(t, "", "ip", append([]string{"netns", "exec", n.Node, "iptables-nft"}, args...)...)
	}
}
