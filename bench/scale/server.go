package scale

// This file holds what the scale section runs beside the simulated nodes:
// the Temporal dev server, the orchestrator process, the found ruleset they
// serve, and the reads of the server (counts, histories) and of memory.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"adoption/bench/benchns"
	"adoption/config"
	"adoption/firewall/eval"
	"adoption/firewall/marks"
	"adoption/internal/devserver"
	"adoption/internal/ufwfixture"
	"adoption/sandbox"
)

// foundRuleset lists ufwfixture.DefaultDeny(22/tcp) from a throwaway bn-
// namespace: the found firewall a simulated node reports; with open, also
// a marked rule opening that port in ufw-user-input, as the node's marks
// place it when its module migrates. The rule's comment names the first
// simulated node: every node shares the one listing, and what reads a
// mark in a listing (the found fingerprint, the evaluation) goes by its
// prefix (firewall.RuleOwner).
func foundRuleset(open *config.Port) (json.RawMessage, error) {
	ns, err := benchns.New("sc")
	if err != nil {
		return nil, err
	}
	defer ns.Del()
	rules := ufwfixture.DefaultDeny(config.MustPorts([]string{"22/tcp"}))
	if open != nil {
		mark := marks.Mark{Node: "sim00000", Owner: simModule.Name, Port: open.Num, Proto: open.Proto}
		rules = strings.Replace(rules, "COMMIT\n", fmt.Sprintf("-A ufw-user-input -p %s -m %s --dport %d -m comment --comment %q -j ACCEPT\nCOMMIT\n",
			open.Proto, open.Proto, open.Num, mark.Comment()), 1)
	}
	for _, fam := range []string{"iptables-restore", "ip6tables-restore"} {
		if _, err := ns.Run([]byte(rules), fam); err != nil {
			return nil, err
		}
	}
	rs, err := eval.Inspector{Netns: ns.Path}.Ruleset()
	if err != nil {
		return nil, err
	}
	return json.Marshal(rs)
}

// devServer is the simulation's dev server and the CLI version it reports.
type devServer struct {
	*devserver.Server
	version string
	metrics string // the server's Prometheus endpoint (writes.go)
}

// startServer starts a dev server as the tests do, on free ports with its
// own database file, and the long polls and partitions a thousand node
// queues need.
func startServer(bin, dbFile, dir string, longPolls int, more []string) (*devServer, error) {
	port, err := devserver.Port()
	if err != nil {
		return nil, err
	}
	metricsPort, err := devserver.Port()
	if err != nil {
		return nil, err
	}
	s := &devServer{metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)}
	if v, err := exec.Command(bin, "--version").Output(); err == nil {
		s.version = strings.TrimSpace(string(v))
	}
	extra := []string{"--dynamic-config-value", fmt.Sprintf("frontend.namespaceCount=%d", longPolls),
		// One partition per task queue: a node queue has one poller, and
		// 1,000 queues of 4 partitions each are 4,000 task queue rows for
		// SQLite to create at once.
		"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
		"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1"}
	for _, kv := range more {
		extra = append(extra, "--dynamic-config-value", kv)
	}
	s.Server, err = devserver.Launch(devserver.Spec{Bin: bin, Port: port, MetricsPort: metricsPort, DB: dbFile, Log: filepath.Join(dir, "server.log"),
		Extra: extra})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func isTransient(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var exhausted *serviceerror.ResourceExhausted
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &exhausted) ||
		errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "context deadline exceeded")
}

func history(ctx context.Context, c client.Client, id string) (events, bytes int, err error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return 0, 0, fmt.Errorf("history of %s: %w", id, err)
		}
		events++
		bytes += proto.Size(e)
	}
	return events, bytes, nil
}

// orchestrator is `adopt-worker orchestrate`, built from this tree and run
// as its own process, so that its memory is its own.
type orchestrator struct {
	cmd     *exec.Cmd
	buildID string
	done    chan struct{}
}

func startOrchestrator(dir, addr, pollers, tree string) (*orchestrator, error) {
	exe := filepath.Join(dir, "adopt-worker")
	build := exec.Command("go", "build", "-o", exe, "./worker")
	build.Dir = tree // "": this tree
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build adopt-worker: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(dir, "orchestrator.log"))
	if err != nil {
		return nil, err
	}
	o := &orchestrator{done: make(chan struct{}), buildID: "bench"}
	args := []string{"orchestrate", "--build-id", o.buildID}
	if pollers != "" {
		args = append(args, "--workflow-pollers", pollers)
	}
	// The witness signs its verdicts with the run's witness key, which the
	// simulated nodes list (startNode): an older tree ignores it.
	wk, err := sandbox.WitnessKey()
	if err != nil {
		return nil, err
	}
	o.cmd = exec.Command(exe, args...)
	o.cmd.Env = append(os.Environ(), "ADOPT_CONFIG=", "ADOPT_TEMPORAL_ADDRESS="+addr, "ADOPT_WITNESS_KEY="+wk.Path)
	o.cmd.Stdout, o.cmd.Stderr = logf, logf
	if err := o.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { o.cmd.Wait(); logf.Close(); close(o.done) }() //nolint:errcheck
	return o, nil
}

func (o *orchestrator) stop() {
	terminate(o.cmd, o.done)
}
func rssMiB(pid, field string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

type peakMem struct {
	rss, heapInuse, heapAlloc float64
	goroutines                int
}

type sampler struct {
	done chan struct{}
	out  chan peakMem
}

func startSampler() *sampler {
	s := &sampler{done: make(chan struct{}), out: make(chan peakMem, 1)}
	go func() {
		var p peakMem
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			p.rss = max(p.rss, rssMiB("self", "VmRSS"))
			p.heapInuse = max(p.heapInuse, float64(m.HeapInuse)/(1<<20))
			p.heapAlloc = max(p.heapAlloc, float64(m.HeapAlloc)/(1<<20))
			p.goroutines = max(p.goroutines, runtime.NumGoroutine())
			select {
			case <-s.done:
				s.out <- p
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() peakMem {
	close(s.done)
	return <-s.out
}

// terminate asks cmd to stop and kills it after 20 s; done closes when it
// has exited.
func terminate(cmd *exec.Cmd, done chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
