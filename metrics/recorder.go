// This file holds adoption's own series on the agent's side (adoption_*),
// behind the small interface the activities call. Each series carries the
// node's label; the phase per node and its search attributes come from the
// workflow side (workflows/metrics.go), through the SDK's handler.
package metrics

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Recorder is what the node's activities report. Calls are cheap and never
// fail: a metric must not change what the activity does.
type Recorder interface {
	// MarkedRules says how many marked rules of owner are in the ruleset now.
	MarkedRules(owner string, n int)
	// ReconcileRepairs counts marked rules a reconcile had to put back.
	ReconcileRepairs(n int)
	// Drift says how many drift items the last check found.
	Drift(n int)
	// CutoverStep records one cutover step: its duration and its outcome
	// ("ok", "error" or "refused"). The module goes to the log lines, not
	// to a label: a step happens once per module, and a series per module
	// would grow with the fleet without ever being read as a rate.
	CutoverStep(module, step, outcome string, d time.Duration)
	// PreviewRefused counts a preview that refused the flip.
	PreviewRefused()
	// FlipState says which state the node's flip record is in.
	FlipState(state string)
	// WatchdogRevert counts a flip the watchdog reverted (once per flip).
	WatchdogRevert(flip string)
}

// Nop records nothing: for commands that serve no metrics (probe) and tests.
type Nop struct{}

func (Nop) MarkedRules(string, int)                           {}
func (Nop) ReconcileRepairs(int)                              {}
func (Nop) Drift(int)                                         {}
func (Nop) CutoverStep(string, string, string, time.Duration) {}
func (Nop) PreviewRefused()                                   {}
func (Nop) FlipState(string)                                  {}
func (Nop) WatchdogRevert(string)                             {}

// FlipStates are the states adoption_flip_state reports, one series each.
var FlipStates = []string{"none", "applying", "flipped", "confirmed", "reverted", "committed"}

type recorder struct {
	marked   *prometheus.GaugeVec
	repairs  prometheus.Counter
	drift    prometheus.Gauge
	steps    *prometheus.CounterVec
	stepSecs *prometheus.CounterVec
	refusals prometheus.Counter
	flip     *prometheus.GaugeVec
	reverts  prometheus.Counter
	mu       sync.Mutex
	reverted map[string]bool // flips whose watchdog revert is counted
}

func newRecorder(reg prometheus.Registerer, node string) (*recorder, error) {
	l := prometheus.Labels{"node": node}
	r := &recorder{
		marked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "adoption_marked_rules", ConstLabels: l,
			Help: "Marked rules adoption:<node>:<owner>:* present in the found firewall, per owner, as last opened or reconciled."}, []string{"owner"}),
		repairs: prometheus.NewCounter(prometheus.CounterOpts{Name: "adoption_reconcile_repairs_total", ConstLabels: l,
			Help: "Marked rules a reconcile found missing and put back (a reload of the found firewall, a hand edit)."}),
		drift: prometheus.NewGauge(prometheus.GaugeOpts{Name: "adoption_drift_items", ConstLabels: l,
			Help: "Drift items (custody files, the found firewall's own rules) the last drift check found."}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "adoption_cutover_steps_total", ConstLabels: l,
			Help: "Cutover steps done (preflight, create, files, swap, healthy, rollback, prune) by outcome (ok, error, refused)."}, []string{"step", "outcome"}),
		stepSecs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "adoption_cutover_step_seconds_total", ConstLabels: l,
			Help: "Seconds spent in cutover steps, by step: divided by adoption_cutover_steps_total, the mean duration."}, []string{"step"}),
		refusals: prometheus.NewCounter(prometheus.CounterOpts{Name: "adoption_preview_refusals_total", ConstLabels: l,
			Help: "Flip previews that refused (a port would close undeclared, a management port, a predecessor that cannot be neutralised)."}),
		flip: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "adoption_flip_state", ConstLabels: l,
			Help: "1 for the state of the node's flip record (none, applying, flipped, confirmed, reverted, committed), 0 for the others."}, []string{"state"}),
		reverts: prometheus.NewCounter(prometheus.CounterOpts{Name: "adoption_watchdog_reverts_total", ConstLabels: l,
			Help: "Flips the watchdog reverted because nobody confirmed them in time, as seen by this agent."}),
		reverted: map[string]bool{},
	}
	for _, c := range []prometheus.Collector{r.marked, r.repairs, r.drift, r.steps, r.stepSecs, r.refusals, r.flip, r.reverts} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	r.FlipState("none")
	return r, nil
}

func (r *recorder) MarkedRules(owner string, n int) { r.marked.WithLabelValues(owner).Set(float64(n)) }
func (r *recorder) ReconcileRepairs(n int)          { r.repairs.Add(float64(n)) }
func (r *recorder) Drift(n int)                     { r.drift.Set(float64(n)) }
func (r *recorder) PreviewRefused()                 { r.refusals.Inc() }

func (r *recorder) CutoverStep(_, step, outcome string, d time.Duration) {
	r.steps.WithLabelValues(step, outcome).Inc()
	r.stepSecs.WithLabelValues(step).Add(d.Seconds())
}

func (r *recorder) FlipState(state string) {
	for _, s := range FlipStates {
		v := 0.0
		if s == state {
			v = 1
		}
		r.flip.WithLabelValues(s).Set(v)
	}
}

func (r *recorder) WatchdogRevert(flip string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reverted[flip] {
		r.reverted[flip] = true
		r.reverts.Inc()
	}
}
