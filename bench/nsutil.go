package main

// What the sections do in the bench's namespaces (bench/benchns): hammer a
// port from a peer namespace, and make a namespace a ufw node.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"adoption/bench/benchns"
	"adoption/bench/report"
	"adoption/netns"
	"adoption/sandbox"
)

type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

// HammerRun is what a hammer saw: one new connection every `every`, each
// dialled with a 500 ms timeout and reading the greeting within 500 ms (as
// sandbox.Hammer does), while one connection opened first is held and asked
// to echo at the end.
type HammerRun struct {
	Attempts int  `json:"attempts"`
	OK       int  `json:"ok"`
	Refused  int  `json:"refused"`
	TimedOut int  `json:"timed_out"`
	Held     bool `json:"held_connection_survived"`
	// LongestOutageMS runs from the start of the first failed attempt to
	// the start of the next successful one.
	LongestOutageMS float64 `json:"longest_outage_ms"`
}

func (h HammerRun) Failed() int { return h.Refused + h.TimedOut }

// hammer connects from inside the peer namespace to addr until stop is
// called. sandbox.Hammer runs for a fixed duration; this one stops when the
// procedure it watches is over, so runs of unequal length compare fairly.
func hammer(peer *benchns.NS, addr string, every time.Duration) (stop func() (HammerRun, error)) {
	return hammerOn(peer.Path, addr, every, greeting{})
}

// speaker is what a hammer says on its connections: the sandbox's and the
// bench's own listeners greet (greeting); a container's service speaks
// HTTP and says nothing until asked (httpHealth).
type speaker interface {
	// open starts the held connection.
	open(c net.Conn, br *bufio.Reader) error
	// fresh is one new connection's exchange.
	fresh(c net.Conn, br *bufio.Reader) error
	// still says whether the held connection still carries data.
	still(c net.Conn, br *bufio.Reader) bool
}

// greeting reads a listener's greeting line; the held connection is asked
// to echo at the end.
type greeting struct{}

func (greeting) open(c net.Conn, br *bufio.Reader) error {
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := br.ReadString('\n')
	return err
}

func (greeting) fresh(c net.Conn, br *bufio.Reader) error {
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err := br.ReadByte()
	return err
}

func (greeting) still(c net.Conn, br *bufio.Reader) bool {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("still-here\n")); err != nil {
		return false
	}
	line, err := br.ReadString('\n')
	return err == nil && line == "still-here\n"
}

// httpHealth asks GET /health and wants a 200: each fresh connection with
// Connection: close, the held one as a keep-alive connection asked at the
// start and again at the end.
type httpHealth struct{}

func (httpHealth) open(c net.Conn, br *bufio.Reader) error {
	return sandbox.HealthCheck(c, br, true, time.Second)
}

func (httpHealth) fresh(c net.Conn, br *bufio.Reader) error {
	return sandbox.HealthCheck(c, br, false, 500*time.Millisecond)
}

func (httpHealth) still(c net.Conn, br *bufio.Reader) bool {
	return sandbox.HealthCheck(c, br, true, 2*time.Second) == nil
}

// hammerOn is hammer from the namespace at peerPath, speaking sp.
func hammerOn(peerPath, addr string, every time.Duration, sp speaker) (stop func() (HammerRun, error)) {
	done := make(chan struct{})
	var res HammerRun
	var herr error
	var wg sync.WaitGroup
	wg.Add(1)
	started := make(chan error, 1)
	go func() {
		defer wg.Done()
		herr = netns.Do(peerPath, func() error {
			held, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				started <- err
				return fmt.Errorf("open the held connection: %w", err)
			}
			defer held.Close()
			hbr := bufio.NewReader(held)
			if err := sp.open(held, hbr); err != nil {
				started <- err
				return fmt.Errorf("the held connection's first exchange: %w", err)
			}
			started <- nil
			var outageStart time.Time
			for {
				select {
				case <-done:
					res.Held = sp.still(held, hbr)
					if !outageStart.IsZero() {
						res.LongestOutageMS = max(res.LongestOutageMS, report.MS(time.Since(outageStart)))
					}
					return nil
				default:
				}
				at := time.Now()
				ok := false
				c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
				res.Attempts++
				switch {
				case err == nil:
					if sp.fresh(c, bufio.NewReader(c)) != nil {
						res.TimedOut++
					} else {
						res.OK++
						ok = true
					}
					c.Close()
				case errors.Is(err, syscall.ECONNREFUSED):
					res.Refused++
				default:
					res.TimedOut++
				}
				switch {
				case !ok && outageStart.IsZero():
					outageStart = at
				case ok && !outageStart.IsZero():
					res.LongestOutageMS = max(res.LongestOutageMS, report.MS(at.Sub(outageStart)))
					outageStart = time.Time{}
				}
				time.Sleep(every)
			}
		})
		select { // netns.Do failed before fn ran
		case started <- herr:
		default:
		}
	}()
	serr := <-started
	return func() (HammerRun, error) {
		close(done)
		wg.Wait()
		if serr != nil && herr == nil {
			herr = serr
		}
		return res, herr
	}
}

// ufwNodeSteps make namespace ns a ufw node with its own copy of /etc/ufw
// and /etc/default (ip netns exec bind-mounts /etc/netns/NS/* over /etc):
// default deny incoming and routed, allow 22, 80, 443/tcp and allows,
// route allow 8443/tcp, enabled.
func ufwNodeSteps(ns string, allows ...string) [][]string {
	etc := filepath.Join("/etc/netns", ns)
	steps := [][]string{
		{"mkdir", "-p", etc},
		{"cp", "-a", "/etc/ufw", filepath.Join(etc, "ufw")},
		{"cp", "-a", "/etc/default", filepath.Join(etc, "default")},
		{"sed", "-i", "-e", `s/^IPT_MODULES=.*/IPT_MODULES=""/`, "-e", "s/^IPV6=.*/IPV6=yes/", filepath.Join(etc, "default", "ufw")},
	}
	ufw := [][]string{{"--force", "reset"}, {"default", "deny", "incoming"}, {"default", "deny", "routed"},
		{"allow", "22/tcp"}, {"allow", "80/tcp"}, {"allow", "443/tcp"}}
	for _, a := range allows {
		ufw = append(ufw, []string{"allow", a})
	}
	ufw = append(ufw, []string{"route", "allow", "proto", "tcp", "to", "any", "port", "8443"}, []string{"--force", "enable"})
	for _, u := range ufw {
		steps = append(steps, append([]string{"ip", "netns", "exec", ns, "ufw"}, u...))
	}
	return steps
}

// runSteps runs each command in turn, stopping at the first that fails.
func runSteps(steps [][]string) error {
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}
