// Package witness confirms a flip from outside the node: an activity on the
// orchestrator's own task queue dials the node's management ports, so a
// flip that still lets the agent reach Temporal but locks the operator out
// is not confirmed. It changes nothing anywhere; it only connects.
package witness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/crypto/ssh"

	"adoption/config"
	"adoption/netns"
)

// ErrLockedOut is the error type of a witness that no management port
// answered: the flip must revert.
const ErrLockedOut = "LockedOut"

// Input names what to dial: each TCP management port on each address, from
// From when set.
type Input struct {
	Node      string        `json:"node"`
	Addresses []string      `json:"addresses"`
	From      string        `json:"from,omitempty"`
	Netns     string        `json:"netns,omitempty"` // a namespace of the orchestrator's host to dial from
	Ports     []config.Port `json:"ports"`
	// After, when set, makes the witness wait until the node reports the
	// flip applied before it dials (after.go).
	After *After `json:"after,omitempty"`
	// PlanHash is the hash of the plan the flip is made under: a signed
	// verdict names it (signed.go).
	PlanHash string `json:"plan_hash,omitempty"`
}

// Result says, per management port, where it answered.
type Result struct {
	Answered []string `json:"answered"`
	Skipped  []string `json:"skipped,omitempty"` // ports a connection cannot test (UDP)
	// Verdict is the signed verdict of a witness with a key, which the
	// workflow answers the node's query with.
	Verdict *Verdict `json:"verdict,omitempty"`
}

// Witness holds the dialer; tests pass their own.
type Witness struct {
	Dialer  func(from netip.Addr) *net.Dialer
	Timeout time.Duration
	// Describe and Converter read the node's pending flip activity (its
	// heartbeat), for an Input with After.
	Describe  Describer
	Converter converter.DataConverter
	// Every is how often that activity is read (0: 100 ms).
	Every time.Duration
	// Heartbeat, when set, tells a node that reads verdicts by describe
	// the verdict as this activity's heartbeat (verdict.go).
	Heartbeat Heartbeater
	// Signer, when set, signs each verdict (signed.go): the key whose
	// public half the nodes list in flip.witness.key.
	Signer ssh.Signer
	// Now is the clock verdicts are signed at (nil: time.Now).
	Now func() time.Time
}

// New is the orchestrator's witness: 5 s per connection.
func New() *Witness { return &Witness{Timeout: 5 * time.Second} }

// Witness dials every TCP management port on every address until one
// answers. A port answers when the connection is accepted, or refused by
// the node's kernel (a reset: the firewall let the packet in and nothing
// listens, which no flip can be blamed for). Every TCP port must answer on
// some address, else the error (ErrLockedOut, not retried) names each
// address's failure.
// With After, the witness first waits for the flip applied and, when the
// node announced it reads verdicts by describe, tells it the verdict as
// its heartbeat and lingers until the node read it (verdict.go); the
// result is the same either way.
func (w *Witness) Witness(ctx context.Context, in Input) (*Result, error) {
	if in.After == nil {
		return w.dialAll(ctx, in)
	}
	p, err := w.awaitApplied(ctx, *in.After)
	if err != nil {
		return nil, err
	}
	res, err := w.dialAll(ctx, in)
	v, serr := w.sign(in, verdictOf(in.After.FlipID, res, err))
	if serr != nil {
		return nil, serr
	}
	if p.Reads && w.Heartbeat != nil && activity.IsActivity(ctx) {
		w.tell(ctx, *in.After, v)
	}
	if res != nil && v.Sig != nil {
		res.Verdict = &v
	}
	return res, err
}

// sign signs v for in's node and plan when the witness holds a key.
func (w *Witness) sign(in Input, v Verdict) (Verdict, error) {
	if w.Signer == nil {
		return v, nil
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	return v.Sign(w.Signer, in.Node, in.PlanHash, now())
}

// dialAll dials every TCP management port, as Witness says.
func (w *Witness) dialAll(ctx context.Context, in Input) (*Result, error) {
	var from netip.Addr
	if in.From != "" {
		a, err := netip.ParseAddr(in.From)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip.witness.from %q is not an IP address", in.From), ErrLockedOut, err)
		}
		from = a
	}
	tcp := false
	for _, p := range in.Ports {
		tcp = tcp || p.Proto == "tcp"
	}
	if tcp && len(in.Addresses) == 0 {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no address of node %s to dial from outside: set flip.witness.address in its configuration", in.Node), ErrLockedOut, nil)
	}
	res := &Result{}
	var missing []string
	for _, p := range in.Ports {
		if p.Proto != "tcp" {
			res.Skipped = append(res.Skipped, p.String())
			continue
		}
		var why []string
		ok := false
		for _, addr := range in.Addresses {
			err := w.dial(ctx, in.Netns, from, net.JoinHostPort(addr, strconv.Itoa(int(p.Num))))
			if err == nil {
				res.Answered = append(res.Answered, p.String()+" on "+addr)
				ok = true
				break
			}
			why = append(why, fmt.Sprintf("%s: %v", addr, err))
		}
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", p, strings.Join(why, "; ")))
		}
	}
	if len(missing) > 0 {
		src := "the orchestrator's host"
		if in.From != "" {
			src = in.From
		}
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("management port(s) of node %s did not answer from %s: %s", in.Node, src, strings.Join(missing, ", ")), ErrLockedOut, nil)
	}
	return res, nil
}

func (w *Witness) dial(ctx context.Context, ns string, from netip.Addr, hostport string) error {
	d := &net.Dialer{Timeout: w.Timeout}
	if w.Dialer != nil {
		d = w.Dialer(from)
	} else if from.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
	}
	c, err := netns.Dial(ctx, ns, d, hostport)
	if err == nil {
		return c.Close()
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil // the node's kernel answered: the firewall let it in
	}
	return err
}
