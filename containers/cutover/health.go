package cutover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// healthPoll is how often WaitHealthy looks; a variable so unit tests can
// shorten it.
var healthPoll = 100 * time.Millisecond

// WaitHealthy waits up to timeout for the container called name to be
// healthy: its own Docker healthcheck when it has one (the image's or the
// Spec's), otherwise probe (see TCPProbe, HTTPProbe), otherwise merely
// running. It fails at once, with the container's last output, when the
// container exits, restarts or its healthcheck says unhealthy: a crashing
// service is not waited on for the whole timeout. It changes nothing, so it
// is safe to call again; it reports StepWaitHealthy to the progress hook
// about every second.
func (e *Engine) WaitHealthy(ctx context.Context, name string, probe func(context.Context) error, timeout time.Duration) error {
	if err := e.ready(); err != nil {
		return err
	}
	if err := e.step(ctx, StepWaitHealthy); err != nil {
		return err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := e.inspect(ctx, name)
	if err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("wait for %s: no container of that name", name)
	}
	restarts := c.RestartCount
	hc := c.Config != nil && c.Config.Healthcheck != nil && len(c.Config.Healthcheck.Test) > 0 && c.Config.Healthcheck.Test[0] != "NONE"
	how := "running"
	switch {
	case hc:
		how = "its Docker healthcheck"
	case probe != nil:
		how = "the module's health probe"
	}
	start, beat := time.Now(), time.Now()
	var last error
	for {
		if c == nil {
			return fmt.Errorf("container %s vanished while waiting for it to become healthy: %w", name, ErrUnhealthy)
		}
		st := c.State
		if st == nil || !st.Running || st.Restarting || c.RestartCount > restarts {
			status, code := "gone", 0
			if st != nil {
				status, code = string(st.Status), st.ExitCode
			}
			return &OutputError{Reason: fmt.Sprintf("container %s stopped (%s, exit code %d) %s after start, before it was healthy",
				name, status, code, time.Since(start).Round(time.Millisecond)), What: "its last output", Output: e.tail(parent, c.ID), Err: ErrUnhealthy}
		}
		switch {
		case hc && st.Health != nil:
			switch st.Health.Status {
			case container.Healthy:
				return nil
			case container.Unhealthy:
				return &OutputError{Reason: fmt.Sprintf("container %s is unhealthy by its healthcheck", name), What: "the healthcheck's output", Output: lastHealthOutput(st.Health), Err: ErrUnhealthy}
			}
			last = fmt.Errorf("healthcheck %s", st.Health.Status)
		case hc:
			last = errors.New("healthcheck has not run yet")
		case probe != nil:
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			last = probe(pctx)
			pcancel()
			if last == nil {
				return nil
			}
		default:
			return nil
		}
		if time.Since(beat) >= time.Second {
			beat = time.Now()
			if err := e.step(ctx, StepWaitHealthy); err != nil && parent.Err() == nil && ctx.Err() == nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return parent.Err()
			}
			return fmt.Errorf("container %s not healthy by %s after %s: %v: %w", name, how, timeout, last, ErrUnhealthy)
		case <-time.After(healthPoll):
		}
		if c, err = e.inspect(ctx, name); err != nil {
			if ctx.Err() != nil {
				continue // the select above reports the timeout
			}
			return err
		}
	}
}

// OutputError is a failure that carries the container's own output (its
// logs, its healthcheck's output), which may hold secrets: Error() has it,
// for the agent's log; Reason is the part that may go to a workflow history.
type OutputError struct {
	Reason string
	What   string // what Output is, e.g. "its last output"
	Output string
	Err    error
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("%s; %s: %s: %v", e.Reason, e.What, e.Output, e.Err)
}

func (e *OutputError) Unwrap() error { return e.Err }

func lastHealthOutput(h *container.Health) string {
	if h == nil || len(h.Log) == 0 || h.Log[len(h.Log)-1] == nil {
		return "no output"
	}
	r := h.Log[len(h.Log)-1]
	return fmt.Sprintf("exit %d: %s", r.ExitCode, clip(strings.TrimSpace(r.Output)))
}

// tail is the container's last lines of output, for an error message.
func (e *Engine) tail(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	rc, err := e.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "10"})
	if err != nil {
		return fmt.Sprintf("(logs unavailable: %v)", err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil && out.Len() == 0 {
		return fmt.Sprintf("(logs unreadable: %v)", err)
	}
	if s := strings.TrimSpace(out.String()); s != "" {
		return clip(s)
	}
	return "(none)"
}

func clip(s string) string {
	const max = 1000
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}

// TCPProbe connects to addr ("host:port") with a one-second timeout. A
// connection the far end closes at once counts as a failure: Docker's
// userland proxy accepts on a published port even when nothing listens
// behind it.
func TCPProbe(addr string) func(context.Context) error {
	return func(ctx context.Context) error { return tcpCheck(ctx, addr, time.Second, 50*time.Millisecond) }
}

func tcpCheck(ctx context.Context, addr string, timeout, hold time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return heldOpen(c, addr, hold)
}

// heldOpen tells a connection something listens behind from one a proxy
// accepted and closed at once.
func heldOpen(c net.Conn, addr string, hold time.Duration) error {
	if hold <= 0 {
		return nil
	}
	_ = c.SetReadDeadline(time.Now().Add(hold))
	var b [1]byte
	_, err := c.Read(b[:])
	if err == nil {
		return nil // it spoke first: up
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil // held open and silent: up
	}
	return fmt.Errorf("%s accepted and closed the connection at once (nothing listening behind a proxy?): %w", addr, err)
}

// HTTPProbe GETs url with a two-second timeout; a 2xx or 3xx answer is
// healthy.
func HTTPProbe(url string) func(context.Context) error {
	return func(ctx context.Context) error { return httpCheck(ctx, url, 2*time.Second) }
}

var probeTransport = &http.Transport{DisableKeepAlives: true}

func httpCheck(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// No redirects followed, no connection reused: each probe is a fresh
	// client, as a user's would be.
	c := http.Client{Transport: probeTransport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// MeasureUnavailability runs do while a prober checks probeAddr every
// `every` (the bench uses 10 ms), and reports the longest window in which the
// service did not answer and how many probes failed. probeAddr is
// "host:port" for a TCP connect (a connection closed at once counts as a
// failure, see TCPProbe) or an http:// or https:// URL for a GET. A window
// runs from the start of the first failed probe to the end of the next
// successful one, so it is measured the same way for any two procedures
// compared side by side.
//
// The service must answer before do runs (else an error); after do returns,
// probing goes on until it answers again, or ctx ends (an error: the service
// did not come back). do's own error is returned as err.
func MeasureUnavailability(ctx context.Context, probeAddr string, every time.Duration, do func() error) (longestGap time.Duration, failures int, err error) {
	if every <= 0 {
		every = 10 * time.Millisecond
	}
	timeout := min(max(10*every, 100*time.Millisecond), time.Second)
	probe := func(ctx context.Context) error {
		return tcpCheck(ctx, probeAddr, timeout, min(every/2, 5*time.Millisecond))
	}
	if strings.HasPrefix(probeAddr, "http://") || strings.HasPrefix(probeAddr, "https://") {
		probe = func(ctx context.Context) error { return httpCheck(ctx, probeAddr, timeout) }
	}
	return MeasureWith(ctx, probeAddr, probe, every, do)
}

// DialProbe is a TCP probe of addr through dial (e.g. PortHold.Dial, from
// the node's namespace past a hold), with TCPProbe's rule: a connection
// closed at once is no answer.
func DialProbe(dial func(context.Context, string) (net.Conn, error), addr string, timeout time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c, err := dial(ctx, addr)
		if err != nil {
			return err
		}
		defer c.Close()
		return heldOpen(c, addr, 5*time.Millisecond)
	}
}

// MeasureWith is MeasureUnavailability with the caller's probe; what names
// the service in errors.
func MeasureWith(ctx context.Context, what string, probe func(context.Context) error, every time.Duration, do func() error) (longestGap time.Duration, failures int, err error) {
	if every <= 0 {
		every = 10 * time.Millisecond
	}
	probeAddr := what
	if err := probe(ctx); err != nil {
		return 0, 0, fmt.Errorf("measure: %s does not answer before the change: %w", probeAddr, err)
	}

	doDone := make(chan struct{})
	type result struct {
		longest  time.Duration
		failures int
		err      error
	}
	res := make(chan result, 1)
	done := doDone
	go func() {
		var r result
		down := false
		var since time.Time
		t := time.NewTicker(every)
		defer t.Stop()
		finished := false
		for {
			select {
			case <-ctx.Done():
				if down {
					r.err = fmt.Errorf("measure: %s had not answered again %s after it went down: %w", probeAddr, time.Since(since).Round(time.Millisecond), ctx.Err())
				}
				res <- r
				return
			case <-done:
				finished, done = true, nil
				continue
			case <-t.C:
			}
			start := time.Now()
			err := probe(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				r.failures++
				if !down {
					down, since = true, start
				}
			case err == nil && down:
				down = false
				r.longest = max(r.longest, time.Since(since))
			}
			if finished && !down {
				res <- r
				return
			}
		}
	}()
	err = do()
	close(doDone)
	r := <-res
	if err == nil {
		err = r.err
	}
	return r.longest, r.failures, err
}
