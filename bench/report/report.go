// Package report is the bench's one table: a Row is one figure measured in
// a run, ours beside the peer's, with the ratio peer ÷ ours. Every figure
// in the bench is "lower is better", so a ratio above 1 means ours is lower
// (better) by that factor. It also holds the small number helpers the
// sections summarise their samples with. It is shared by package main
// (which prints the table and writes the JSON) and the section packages.
package report

import (
	"fmt"
	"io"
	"math"
	"slices"
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

// WithPeer makes a row with a peer; ratio = peer ÷ ours.
func WithPeer(section, figure string, ours, peer float64, unit, oursIs, peerIs, note string, decimals int) Row {
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

// Absolute makes a row without a peer.
func Absolute(section, figure string, ours float64, unit, oursIs, note string, decimals int) Row {
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

// Print prints the rows: figure, ours, peer, ratio, unit, and a note
// naming which figure is ours and which the peer's.
func Print(w io.Writer, rows []Row) {
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

// Percentile of xs (nearest rank), p in [0, 100]; 0 for none (JSON has
// no NaN).
func Percentile(xs []float64, p float64) float64 {
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

// Median of xs; 0 for none.
func Median(xs []float64) float64 {
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

// MS is d in milliseconds, to the microsecond.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
