package sandbox

// This file holds the hammer for a resolver: clients that query it
// throughout a cutover, each query from a fresh socket (a fresh source
// port, as a stub resolver's), over UDP and, every third, over TCP, and
// count the answers by the address they carry and every query that failed.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// DNSHammerResult counts a DNS hammer's queries.
type DNSHammerResult struct {
	UDP, TCP       int            // queries answered
	UDPFailed      int            `json:"udp_failed"`
	TCPFailed      int            `json:"tcp_failed"`
	Refused        int            `json:"refused"` // of the failed: ICMP unreachable or a TCP reset
	Answers        map[string]int `json:"answers"` // by the A record's address
	Slowest        time.Duration  `json:"slowest"`
	FirstFailure   string         `json:"first_failure,omitempty"`
	FailureSamples []string       `json:"failure_samples,omitempty"`
}

// Failed is every query that got no answer.
func (r DNSHammerResult) Failed() int { return r.UDPFailed + r.TCPFailed }

// HammerDNS queries the resolver at addr with clients clients, each
// every every, for d; a query waits up to 5 s for its answer. answered,
// when not nil, is called once, at the first answer: what a caller waits
// on before what it measures.
func HammerDNS(addr string, clients int, every, d time.Duration, answered func()) DNSHammerResult {
	r := DNSHammerResult{Answers: map[string]int{}}
	var first sync.Once
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				overTCP := (i+c)%3 == 0
				start := time.Now()
				a, err := queryDNS(addr, overTCP, uint16(c<<12|i&0xfff))
				took := time.Since(start)
				mu.Lock()
				switch {
				case err != nil && overTCP:
					r.TCPFailed++
				case err != nil:
					r.UDPFailed++
				case overTCP:
					r.TCP++
				default:
					r.UDP++
				}
				if err != nil {
					if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
						r.Refused++
					}
					if len(r.FailureSamples) < 5 {
						r.FailureSamples = append(r.FailureSamples, err.Error())
					}
				} else {
					r.Answers[a]++
					if answered != nil {
						first.Do(answered)
					}
				}
				if took > r.Slowest {
					r.Slowest = took
				}
				mu.Unlock()
				time.Sleep(every)
			}
		}(c)
	}
	wg.Wait()
	return r
}

// queryDNS asks addr for the A record of resolver.test and returns the
// address answered.
func queryDNS(addr string, overTCP bool, id uint16) (string, error) {
	name := dnsmessage.MustNewName("resolver.test.")
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(5 * time.Second)
	var reply []byte
	if overTCP {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return "", fmt.Errorf("tcp: %w", err)
		}
		defer c.Close()
		_ = c.SetDeadline(deadline)
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
			return "", fmt.Errorf("tcp write: %w", err)
		}
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return "", fmt.Errorf("tcp read: %w", err)
		}
		reply = make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, reply); err != nil {
			return "", fmt.Errorf("tcp read: %w", err)
		}
	} else {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return "", fmt.Errorf("udp: %w", err)
		}
		defer c.Close()
		_ = c.SetDeadline(deadline)
		if _, err := c.Write(q); err != nil {
			return "", fmt.Errorf("udp write: %w", err)
		}
		buf := make([]byte, 1500)
		n, err := c.Read(buf)
		if err != nil {
			return "", fmt.Errorf("udp read: %w", err)
		}
		reply = buf[:n]
	}
	var p dnsmessage.Parser
	h, err := p.Start(reply)
	if err != nil || h.ID != id {
		return "", fmt.Errorf("not the answer to query %d: %v", id, err)
	}
	if err := p.SkipAllQuestions(); err != nil {
		return "", err
	}
	rh, err := p.AnswerHeader()
	if err != nil {
		return "", fmt.Errorf("no answer: %w", err)
	}
	if rh.Type != dnsmessage.TypeA {
		return "", fmt.Errorf("answer of type %v", rh.Type)
	}
	a, err := p.AResource()
	if err != nil {
		return "", err
	}
	return net.IP(a.A[:]).String(), nil
}
