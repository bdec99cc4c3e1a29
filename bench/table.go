package main

// The one table `make bench` prints, and the JSON file it writes: every row
// is one figure measured in this run, ours beside the peer's, with the
// ratio peer ÷ ours. Every figure in this bench is "lower is better", so a
// ratio above 1 means ours is lower (better) by that factor.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one figure.
type Row struct {
	Section string   `json:"section"`
	Figure  string   `json:"figure"`
	Ours    float64  `json:"ours"`
	Peer    *float64 `json:"peer"`  // nil: no peer (absolute figure)
	Ratio   *float64 `json:"ratio"` // peer ÷ ours; nil when there is no peer or ours is 0
	// RatioText is the ratio as printed ("41.6x", "inf: ours 0", "-").
	RatioText string `json:"ratio_text"`
	Unit      string `json:"unit"`
	OursIs    string `json:"ours_is"`
	PeerIs    string `json:"peer_is"`
	Note      string `json:"note,omitempty"`
	Decimals  int    `json:"-"`
}

// row makes a row with a peer; ratio = peer ÷ ours.
func row(section, figure string, ours, peer float64, unit, oursIs, peerIs, note string, decimals int) Row {
	r := Row{Section: section, Figure: figure, Ours: ours, Peer: &peer, Unit: unit, OursIs: oursIs, PeerIs: peerIs, Note: note, Decimals: decimals}
	switch {
	case ours == 0 && peer == 0:
		one := 1.0
		r.Ratio, r.RatioText = &one, "1x (both 0)"
	case ours == 0:
		r.RatioText = "inf (ours 0)"
	default:
		q := peer / ours
		r.Ratio = &q
		r.RatioText = fmt.Sprintf("%.*fx", ratioDecimals(q), q)
	}
	return r
}

// absolute makes a row without a peer.
func absolute(section, figure string, ours float64, unit, oursIs, note string, decimals int) Row {
	return Row{Section: section, Figure: figure, Ours: ours, Unit: unit, OursIs: oursIs,
		PeerIs: "none (absolute figure)", RatioText: "-", Note: note, Decimals: decimals}
}

func ratioDecimals(q float64) int {
	switch {
	case q >= 10:
		return 0
	case q >= 1:
		return 1
	default:
		return 2
	}
}

func num(v float64, decimals int) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", decimals, v)
}

// printTable prints the rows: figure, ours, peer, ratio, unit, and a note
// naming which figure is ours and which the peer's.
func printTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tours\tpeer\tpeer/ours\tunit\tnote (ours | peer)")
	for _, r := range rows {
		peer := "-"
		if r.Peer != nil {
			peer = num(*r.Peer, r.Decimals)
		}
		note := "ours: " + r.OursIs + " | peer: " + r.PeerIs
		if r.Note != "" {
			note += "; " + r.Note
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Figure, num(r.Ours, r.Decimals), peer, r.RatioText, r.Unit, note)
	}
	tw.Flush()
}

// Results is what bench/results/bench-<date>.json holds: the table, then
// each section's own figures in detail.
type Results struct {
	Date     string         `json:"date"`
	Host     Host           `json:"host"`
	Note     string         `json:"note"`
	Rows     []Row          `json:"rows"`
	Skipped  []string       `json:"skipped,omitempty"`
	Errors   []string       `json:"errors,omitempty"`
	Sections map[string]any `json:"sections"`
}

// Host says where the figures were taken.
type Host struct {
	Kernel string   `json:"kernel"`
	CPUs   int      `json:"cpus"`
	Go     string   `json:"go"`
	Tools  []string `json:"tools"`
}

func hostInfo() Host {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return Host{Kernel: strings.TrimSpace(string(kernel)), CPUs: runtime.NumCPU(), Go: runtime.Version(), Tools: versions()}
}

func writeResults(dir string, res Results) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "bench-"+time.Now().Format("2006-01-02")+".json")
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false) // "&&" and "<" as they are
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return "", err
	}
	return file, os.WriteFile(file, js.Bytes(), 0o644)
}

// percentile of xs (nearest rank), p in [0, 100]; 0 for none (JSON has
// no NaN).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
