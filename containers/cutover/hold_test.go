package cutover

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeHold records what the swap asks of the hold; its Dial answers from
// a pipe, as a new container that listens.
type fakeHold struct {
	dropping error
	held     map[string][]uint16
	bound    time.Duration
	released []string
	peers    []net.Conn
}

func (h *fakeHold) Hold(owner string, ports []uint16, bound time.Duration) error {
	if h.held == nil {
		h.held = map[string][]uint16{}
	}
	h.held[owner], h.bound = ports, bound
	return nil
}

func (h *fakeHold) Dropping(string) error { return h.dropping }

func (h *fakeHold) NodeAddr() string { return "" }

func (h *fakeHold) Release(owner string) error {
	delete(h.held, owner)
	h.released = append(h.released, owner)
	return nil
}

func (h *fakeHold) Dial(context.Context, string) (net.Conn, error) {
	a, b := net.Pipe()
	h.peers = append(h.peers, b)
	return a, nil
}

// TestSwapReportsHoldFake: the swap holds the predecessor's published
// port for a bounded time, releases it, and reports how it held: queued,
// or dropped with the hold's reason.
func TestSwapReportsHoldFake(t *testing.T) {
	for _, dropping := range []error{nil, errors.New("bind queue 41234: operation not permitted")} {
		f := newFake("mail:1", "mesh/mail:2")
		fakePredecessor(f)
		h := &fakeHold{dropping: dropping}
		e := NewWith(f).WithHold(h)
		var got []HoldReport
		ctx := WithHoldReport(context.Background(), func(r HoldReport) { got = append(got, r) })
		if err := cutover(ctx, e, mailSpec, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		want := HoldReport{Owner: "mail", Ports: []uint16{2525}, Queued: dropping == nil}
		if dropping != nil {
			want.Dropped = dropping.Error()
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Fatalf("hold reported %+v, want %+v", got, want)
		}
		if h.bound != holdBound(time.Second) || h.bound <= time.Second+holdMax {
			t.Fatalf("hold bound %s: it must outlast the stop (1 s) and holdMax", h.bound)
		}
		if len(h.held) != 0 || !reflect.DeepEqual(h.released, []string{"mail"}) {
			t.Fatalf("after the swap: held %v, released %v", h.held, h.released)
		}
		if s := got[0].String(); dropping != nil && !strings.Contains(s, dropping.Error()) {
			t.Fatalf("a dropping hold's report does not say why: %q", s)
		}
		for _, p := range h.peers {
			p.Close()
		}
	}
}
