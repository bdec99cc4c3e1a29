// Package vocab is the node's value vocabulary, shared by config and the
// firewall: ports (PORT/PROTO) and port ranges, names, and the traffic
// classes flip.drop and flip.widen spell. It does no I/O and imports no
// package of adoption, so every room may import it.
//
// This file holds ports: parsing, validating, ranges.
package vocab

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Port is a transport port with its protocol, written PORT/PROTO ("8080/tcp").
type Port struct {
	Num   uint16 `json:"port"`
	Proto string `json:"proto"`
}

func (p Port) String() string { return fmt.Sprintf("%d/%s", p.Num, p.Proto) }

// ParsePort parses "PORT/PROTO" where PROTO is tcp or udp and PORT is 1-65535.
func ParsePort(s string) (Port, error) {
	num, proto, ok := strings.Cut(s, "/")
	if !ok {
		return Port{}, fmt.Errorf("want PORT/PROTO such as 8080/tcp")
	}
	if err := checkProto(proto); err != nil {
		return Port{}, err
	}
	// Digits only, no sign, no padding: the same text must mean the same
	// port to every parser it reaches (the container engine's included).
	n, err := strconv.Atoi(num)
	if err != nil || strings.Trim(num, "0123456789") != "" || strings.HasPrefix(num, "0") || n < 1 || n > 65535 {
		return Port{}, fmt.Errorf("port %q is not a number from 1 to 65535", num)
	}
	return Port{Num: uint16(n), Proto: proto}, nil
}

// Validate is the one definition of a port the mesh can open, mark or
// drop: PORT 1-65535 (0 is not a port) and PROTO tcp or udp. ParsePort
// returns only valid ports; a Port that arrives decoded from JSON (a plan,
// a request) is checked with this.
func (p Port) Validate() error {
	var errs []error
	if p.Num == 0 {
		errs = append(errs, fmt.Errorf("port 0 is not a port: want 1-65535"))
	}
	if err := checkProto(p.Proto); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkProto(proto string) error {
	if proto != "tcp" && proto != "udp" {
		return fmt.Errorf("protocol %q is not tcp or udp", proto)
	}
	return nil
}

// HostPort is the port of a container's published-port key
// ([IP:]PORT/PROTO); ok is false when the key does not name a valid port.
// The address does not matter to the firewall, which filters by port.
func HostPort(key string) (p Port, ok bool) {
	if i := strings.LastIndex(key, ":"); i >= 0 {
		key = key[i+1:]
	}
	p, err := ParsePort(key)
	return p, err == nil
}

// MaxDropRange is the most ports one flip.drop range may name: the plan
// carries each port, and the plan travels in workflow histories.
const MaxDropRange = 1024

// ParsePortRange reads PORT/PROTO or FROM-TO/PROTO (9000-9010/tcp, FROM
// below TO, at most MaxDropRange ports) into its ports, in order.
func ParsePortRange(s string) ([]Port, error) {
	num, proto, ok := strings.Cut(s, "/")
	from, to, isRange := strings.Cut(num, "-")
	if !ok || !isRange {
		p, err := ParsePort(s)
		if err != nil {
			return nil, err
		}
		return []Port{p}, nil
	}
	lo, err := ParsePort(from + "/" + proto)
	if err != nil {
		return nil, fmt.Errorf("range %q: %w", s, err)
	}
	hi, err := ParsePort(to + "/" + proto)
	if err != nil {
		return nil, fmt.Errorf("range %q: %w", s, err)
	}
	if hi.Num <= lo.Num {
		return nil, fmt.Errorf("range %q does not go up: write FROM-TO/PROTO with FROM below TO", s)
	}
	if int(hi.Num)-int(lo.Num)+1 > MaxDropRange {
		return nil, fmt.Errorf("range %q names %d ports, more than %d", s, int(hi.Num)-int(lo.Num)+1, MaxDropRange)
	}
	out := make([]Port, 0, int(hi.Num)-int(lo.Num)+1)
	for n := int(lo.Num); n <= int(hi.Num); n++ {
		out = append(out, Port{Num: uint16(n), Proto: lo.Proto})
	}
	return out, nil
}

// MustPortRanges is MustPorts for specs that may be ranges
// (ParsePortRange), expanded to their ports.
func MustPortRanges(specs []string) []Port {
	out := make([]Port, 0, len(specs))
	for _, s := range specs {
		ps, err := ParsePortRange(s)
		if err != nil {
			panic(fmt.Sprintf("vocab: unvalidated port range %q: %v", s, err))
		}
		out = append(out, ps...)
	}
	return out
}

// MustPorts parses already validated port strings; it is only called after
// Validate succeeded, so a parse error here is a programming error.
func MustPorts(specs []string) []Port {
	out := make([]Port, 0, len(specs))
	for _, s := range specs {
		p, err := ParsePort(s)
		if err != nil {
			panic(fmt.Sprintf("vocab: unvalidated port %q: %v", s, err))
		}
		out = append(out, p)
	}
	return out
}
