package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"adoption/bench/report"
)

// cutoverRows runs the cutover bench (cutover.go) as it is, its own table
// and file going to a temporary directory, and turns its report into rows
// of the one table; its progress lines still reach stdout. The report is
// folded into bench-<date>.json.
func cutoverRows(n int, stdout io.Writer) ([]report.Row, *CutoverReport, error) {
	dir, err := os.MkdirTemp("", "bn-cutover-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	lw := &progressLines{w: stdout, prefix: "cutover"}
	runErr := runCutover(n, dir, lw)
	lw.flush()
	files, _ := filepath.Glob(filepath.Join(dir, "cutover-*.json"))
	if len(files) == 0 {
		if runErr != nil {
			return nil, nil, runErr
		}
		return nil, nil, fmt.Errorf("the cutover bench wrote no result (docker unreachable?):\n%s", lw.all.String())
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return nil, nil, err
	}
	var rep CutoverReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, nil, err
	}
	var ours, overlap, naive *CutoverResult
	for i := range rep.Results {
		switch rep.Results[i].Method {
		case methodOurs:
			ours = &rep.Results[i]
		case methodOverlap:
			overlap = &rep.Results[i]
		case methodNaive:
			naive = &rep.Results[i]
		}
	}
	if ours == nil || overlap == nil || naive == nil {
		return nil, &rep, fmt.Errorf("the cutover report lacks a procedure: %+v", rep.Results)
	}
	peerIs := "docker stop && docker rm && docker run -d (CLI)"
	rows := procRows("swap", ours, naive, "containers.Engine: Preflight, Create beside, Swap holding the port (SYNs queued, let through as the new container answers), WaitHealthy, PortsAnswer", peerIs,
		"goal: within 50 ms of the engine's gap (the gap row)")
	rows = append(rows, procRows("overlap", overlap, naive, "containers.Engine: Preflight, Create (port on loopback), Overlap (started beside, the port steered to it in one transaction, the old drained and stopped), WaitHealthy, PortsAnswer", peerIs,
		"goal: no connect slower than 50 ms")...)
	return rows, &rep, runErr
}

// progressLines passes through the lines that start with prefix and keeps
// everything for an error message.
type progressLines struct {
	w      io.Writer
	prefix string
	buf    bytes.Buffer
	all    bytes.Buffer
}

func (p *progressLines) Write(b []byte) (int, error) {
	p.all.Write(b)
	p.buf.Write(b)
	for {
		line, err := p.buf.ReadString('\n')
		if err != nil {
			p.buf.Reset()
			p.buf.WriteString(line)
			return len(b), nil
		}
		if strings.HasPrefix(line, p.prefix) {
			io.WriteString(p.w, line)
		}
	}
}

func (p *progressLines) flush() {
	if line := p.buf.String(); strings.HasPrefix(line, p.prefix) {
		io.WriteString(p.w, line+"\n")
	}
	p.buf.Reset()
}

// procRows are one procedure's rows beside the peer's, named kind.
func procRows(kind string, ours, naive *CutoverResult, oursIs, peerIs, waitGoal string) []report.Row {
	name := func(f string, a ...any) string { return "cutover (" + kind + "): " + fmt.Sprintf(f, a...) }
	return []report.Row{
		report.WithPeer("cutover", name("failed client connections, all %d runs (6 clients outside the node, a connect may wait 3 s)", ours.Runs),
			float64(ours.FailedProbes), float64(naive.FailedProbes), "connections", oursIs, peerIs,
			fmt.Sprintf("of %d attempts ours, %d peer; goal 0", ours.Attempts, naive.Attempts), 0),
		report.WithPeer("cutover", name("longest wait of a successful connect, all runs"),
			ours.MaxWaitMS, naive.MaxWaitMS, "ms", oursIs, peerIs, waitGoal+"; a dropped SYN waits for its retransmission (1 s)", 0),
		report.WithPeer("cutover", name("longest handshake the clients' kernel measured (SYN to SYN-ACK), all runs"),
			ours.MaxHandshakeMS, naive.MaxHandshakeMS, "ms", oursIs, peerIs,
			fmt.Sprintf("the node's part of the longest wait; connects whose SYN was sent again: ours %d, peer %d; the bench's threads waited for a CPU up to %.0f ms (ours) in a run", ours.SynRetransmitted, naive.SynRetransmitted, ours.MaxCPUWaitMS), 1),
		report.WithPeer("cutover", name("p50 connect during the procedure, median of %d runs", ours.Runs),
			ours.MedianP50WaitMS, naive.MedianP50WaitMS, "ms", oursIs, peerIs, "connects that succeeded", 1),
		report.WithPeer("cutover", name("p99 connect during the procedure, worst run"),
			ours.MaxP99WaitMS, naive.MaxP99WaitMS, "ms", oursIs, peerIs, fmt.Sprintf("connects that succeeded; the hold fell back to dropping in %d of %d runs", ours.HoldDropped, ours.Runs), 0),
		report.WithPeer("cutover", name("clients' gap (no prompt answer to a new connection), median of %d runs", ours.Runs),
			ours.MedianClientGapMS, naive.MedianClientGapMS, "ms", oursIs, peerIs, "prompt: within 200 ms", 1),
		report.WithPeer("cutover", name("gap (nothing answers on the port, probed from the node every 10 ms), median of %d runs", ours.Runs),
			ours.MedianGapMS, naive.MedianGapMS, "ms", oursIs, peerIs,
			fmt.Sprintf("max gap ours %.0f ms, peer %.0f ms; data kept: ours %d/%d, peer %d/%d", ours.MaxGapMS, naive.MaxGapMS, ours.DataKept, ours.Runs, naive.DataKept, naive.Runs), 1),
		report.WithPeer("cutover", name("procedure's own duration, median"), ours.MedianProcedureMS, naive.MedianProcedureMS, "ms",
			oursIs+" (until the ports answer)", peerIs+" (until docker run returned)", "ours waits for health and keeps the predecessor for rollback", 0),
	}
}
