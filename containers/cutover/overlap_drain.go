package cutover

// The overlap's drain: once the module's ports are moved to the new
// container, the predecessor keeps the connections it already has. It is
// stopped when none is left on its container ports (read from the TCP
// tables of its own network namespace, /proc/<pid>/net/tcp and tcp6) or
// when the drain bound passes, whichever comes first.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"adoption/containers/cutoverwire"
)

// DrainReport is cutoverwire.DrainReport.
type DrainReport = cutoverwire.DrainReport

type drainReportKey struct{}

// WithDrainReport returns a context whose overlap cutover reports to fn how
// it drained the predecessor.
func WithDrainReport(ctx context.Context, fn func(DrainReport)) context.Context {
	return context.WithValue(ctx, drainReportKey{}, fn)
}

// drainPoll is how often the predecessor's connections are counted.
const drainPoll = 50 * time.Millisecond

// drain waits until the container with process pid has no connection left
// on ports, or bound passes, and reports how it went.
func (e *Engine) drain(ctx context.Context, name string, pid int, ports map[uint16]bool, bound time.Duration) DrainReport {
	rep := DrainReport{Container: name}
	start := time.Now()
	for {
		n, err := netnsConns(pid, ports)
		if err != nil {
			rep.Unread = err.Error()
			break
		}
		rep.Left = n
		if n == 0 || time.Since(start) >= bound || ctx.Err() != nil {
			break
		}
		time.Sleep(drainPoll)
	}
	rep.Took = time.Since(start)
	if fn, ok := ctx.Value(drainReportKey{}).(func(DrainReport)); ok && fn != nil {
		fn(rep)
	}
	return rep
}

// netnsConns counts the connections on ports in the network namespace of
// process pid.
func netnsConns(pid int, ports map[uint16]bool) (int, error) {
	if pid <= 0 {
		return 0, errors.New("the container has no process")
	}
	total := 0
	for _, f := range []string{"tcp", "tcp6"} {
		p := fmt.Sprintf("/proc/%d/net/%s", pid, f)
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) && f == "tcp6" {
			continue // IPv6 disabled
		}
		if err != nil {
			return 0, err
		}
		n, err := countConns(string(b), ports)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
		total += n
	}
	return total, nil
}

// TCP states as /proc/net/tcp writes them (include/net/tcp_states.h).
const (
	tcpEstablished = 0x01
	tcpSynRecv     = 0x03
	tcpCloseWait   = 0x08
	tcpListen      = 0x0A
)

// countConns counts, in the text of a /proc/net/tcp or tcp6 table, the
// connections whose local port is one of ports and which the service has
// yet to finish: established (accepted or in the accept queue), half open,
// or closed by the client with the answer still due. A listener's accept
// queue (rx_queue of a LISTEN line) is counted when it holds more than the
// table shows.
func countConns(text string, ports map[uint16]bool) (int, error) {
	conns, queued := 0, 0
	sc := bufio.NewScanner(strings.NewReader(text))
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue // the header
		}
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		_, portHex, ok := strings.Cut(f[1], ":")
		if !ok {
			return 0, fmt.Errorf("local address %q: want ADDR:PORT", f[1])
		}
		port, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("local port %q: %v", portHex, err)
		}
		if !ports[uint16(port)] {
			continue
		}
		st, err := strconv.ParseUint(f[3], 16, 8)
		if err != nil {
			return 0, fmt.Errorf("state %q: %v", f[3], err)
		}
		switch st {
		case tcpEstablished, tcpSynRecv, tcpCloseWait:
			conns++
		case tcpListen:
			_, rx, ok := strings.Cut(f[4], ":")
			if !ok {
				return 0, fmt.Errorf("queues %q: want TX:RX", f[4])
			}
			q, err := strconv.ParseUint(rx, 16, 32)
			if err != nil {
				return 0, fmt.Errorf("accept queue %q: %v", rx, err)
			}
			queued += int(q)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return max(conns, queued), nil
}
