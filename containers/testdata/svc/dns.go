// The resolver the unit hand-over tests use: every A question is answered
// with an address that names the version serving it (v1 10.0.0.1, v2
// 10.0.0.2, else 10.0.0.9), over UDP and over TCP (RFC 1035 4.2.2: a
// two-byte length before each message). It binds its UDP socket before it
// listens on TCP, as a resolver does, and stops on SIGTERM.

package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/net/dns/dnsmessage"
)

func versionAddr(version string) [4]byte {
	switch version {
	case "v1":
		return [4]byte{10, 0, 0, 1}
	case "v2":
		return [4]byte{10, 0, 0, 2}
	}
	return [4]byte{10, 0, 0, 9}
}

// answer is the reply to query q, nil when q is not a DNS query.
func answer(q []byte, addr [4]byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) == 0 {
		return nil
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired})
	b.EnableCompression()
	_ = b.StartQuestions()
	for _, x := range qs {
		_ = b.Question(x)
	}
	_ = b.StartAnswers()
	for _, x := range qs {
		if x.Type == dnsmessage.TypeA {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: x.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: addr})
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

func serveDNS(listen, version string) error {
	addr := versionAddr(version)
	udp, err := net.ListenPacket("udp", listen)
	if err != nil {
		return err
	}
	tcp, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "svc %s: resolving on %s (udp and tcp)\n", version, listen)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			if a := answer(buf[:n], addr); a != nil {
				_, _ = udp.WriteTo(a, from)
			}
		}
	}()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					var l [2]byte
					if _, err := io.ReadFull(c, l[:]); err != nil {
						return
					}
					q := make([]byte, binary.BigEndian.Uint16(l[:]))
					if _, err := io.ReadFull(c, q); err != nil {
						return
					}
					a := answer(q, addr)
					if a == nil {
						return
					}
					out := binary.BigEndian.AppendUint16(nil, uint16(len(a)))
					if _, err := c.Write(append(out, a...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	_ = udp.Close()
	return tcp.Close()
}
