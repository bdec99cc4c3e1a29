// This file holds a Docker 28 node's found firewall as iptables-nft
// writes it (docs/firewall.md, Tests).

package fwtest

import ()

// Docker28Rules: the container 172.17.0.2 behind docker0 publishes
// 18080->8080/tcp, 18053->8053/udp, 19100->9100/tcp, and host ports
// 18100-18110 to its ports 18102-18105 (a DNAT to a port range: the kernel
// keeps a client's port inside the range and sends any other to the
// range's first), and 18090->8080/tcp on the uplink's address only
// ("-p 198.18.0.1:18090:8080"). DOCKER accepts 8080/tcp, 8053/udp,
// 18102/tcp and 18104/tcp; 9100 is published but not accepted (its DOCKER rule missing,
// as when a port is published on another address).
const Docker28Rules = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -d 172.17.0.2/32 ! -i docker0 -j DROP
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
-A DOCKER -i docker0 -j RETURN
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18080 -j DNAT --to-destination 172.17.0.2:8080
-A DOCKER ! -i docker0 -p udp -m udp --dport 18053 -j DNAT --to-destination 172.17.0.2:8053
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 19100 -j DNAT --to-destination 172.17.0.2:9100
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18100:18110 -j DNAT --to-destination 172.17.0.2:18102-18105
-A DOCKER -d 198.18.0.1/32 ! -i docker0 -p tcp -m tcp --dport 18090 -j DNAT --to-destination 172.17.0.2:8080
COMMIT
*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:DOCKER - [0:0]
:DOCKER-BRIDGE - [0:0]
:DOCKER-CT - [0:0]
:DOCKER-FORWARD - [0:0]
:DOCKER-ISOLATION-STAGE-1 - [0:0]
:DOCKER-ISOLATION-STAGE-2 - [0:0]
:DOCKER-USER - [0:0]
:ufw-before-input - [0:0]
:ufw-user-input - [0:0]
-A INPUT -j ufw-before-input
-A INPUT -j ufw-user-input
-A ufw-before-input -i lo -j ACCEPT
-A ufw-before-input -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ufw-before-input -m conntrack --ctstate INVALID -j DROP
-A ufw-before-input -p icmp -m icmp --icmp-type 8 -j ACCEPT
-A ufw-user-input -p tcp -m tcp --dport 22 -j ACCEPT
-A FORWARD -j DOCKER-USER
-A FORWARD -j DOCKER-FORWARD
-A DOCKER ! -i docker0 -o docker0 -p tcp -d 172.17.0.2/32 -m tcp --dport 8080 -j ACCEPT
-A DOCKER ! -i docker0 -o docker0 -p udp -d 172.17.0.2/32 -m udp --dport 8053 -j ACCEPT
-A DOCKER ! -i docker0 -o docker0 -p tcp -d 172.17.0.2/32 -m tcp --dport 18102 -j ACCEPT
-A DOCKER ! -i docker0 -o docker0 -p tcp -d 172.17.0.2/32 -m tcp --dport 18104 -j ACCEPT
-A DOCKER ! -i docker0 -o docker0 -j DROP
-A DOCKER-BRIDGE -o docker0 -j DOCKER
-A DOCKER-CT -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A DOCKER-FORWARD -j DOCKER-CT
-A DOCKER-FORWARD -j DOCKER-ISOLATION-STAGE-1
-A DOCKER-FORWARD -j DOCKER-BRIDGE
-A DOCKER-FORWARD -i docker0 -j ACCEPT
-A DOCKER-ISOLATION-STAGE-1 -i docker0 ! -o docker0 -j DOCKER-ISOLATION-STAGE-2
-A DOCKER-ISOLATION-STAGE-2 -o docker0 -j DROP
-A DOCKER-USER -j RETURN
COMMIT
`

// Docker28Rules6 is the same container's IPv6 side (fd00:17::2):
// 18080->8080/tcp published and accepted, the raw drop of its address.
const Docker28Rules6 = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -d fd00:17::2/128 ! -i docker0 -j DROP
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A DOCKER -i docker0 -j RETURN
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18080 -j DNAT --to-destination [fd00:17::2]:8080
COMMIT
*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:DOCKER - [0:0]
:DOCKER-BRIDGE - [0:0]
:DOCKER-CT - [0:0]
:DOCKER-FORWARD - [0:0]
:DOCKER-USER - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p ipv6-icmp -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A FORWARD -j DOCKER-USER
-A FORWARD -j DOCKER-FORWARD
-A DOCKER ! -i docker0 -o docker0 -p tcp -d fd00:17::2/128 -m tcp --dport 8080 -j ACCEPT
-A DOCKER ! -i docker0 -o docker0 -j DROP
-A DOCKER-BRIDGE -o docker0 -j DOCKER
-A DOCKER-CT -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A DOCKER-FORWARD -j DOCKER-CT
-A DOCKER-FORWARD -j DOCKER-BRIDGE
-A DOCKER-FORWARD -i docker0 -j ACCEPT
-A DOCKER-USER -j RETURN
COMMIT
`

// Docker280Forward is Docker 28.0-28.1's DOCKER-FORWARD, which matched the
// container bridges by the ipset docker-ext-bridges-v4 (their subnets),
// for "iptables-nft -A" after the chain is flushed.
var Docker280Forward = [][]string{
	{"-A", "DOCKER-FORWARD", "-j", "DOCKER-ISOLATION-STAGE-1"},
	{"-A", "DOCKER-FORWARD", "-m", "set", "--match-set", "docker-ext-bridges-v4", "dst", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
	{"-A", "DOCKER-FORWARD", "-m", "set", "--match-set", "docker-ext-bridges-v4", "dst", "-j", "DOCKER"},
	{"-A", "DOCKER-FORWARD", "-i", "docker0", "-j", "ACCEPT"},
}
