// A stand-in for Client, kept beside it for tests (as tailscale keeps
// util/linuxfw/fake.go beside its interface): the agent's Temporal client
// as the flip in one round trip uses it, answering at once from its
// fields. This package's tests and activities' (FlipTrip, on the same
// fake) use it. No I/O; production code never calls it.
package trip

import (
	"context"
	"errors"
	"sync"

	"go.temporal.io/sdk/converter"

	"adoption/activities/nodewire"
	"adoption/witness"
)

// Fake records the heartbeats it is given (each a Progress), answers the
// workflow's witness query with Verdicts in turn (the last one repeats;
// none: an error), and a describe with the embedded FakeDescriber's
// answers in turn.
type Fake struct {
	// BeatErr is what every heartbeat returns; the heartbeat is recorded
	// all the same.
	BeatErr  error
	Verdicts []nodewire.WitnessVerdict
	// Answer, if set, is the verdict the query answers, made from the flip
	// ID asked about and the next of Verdicts (a test fills in the ID or
	// signs the verdict here, as the witness would); nil: the verdict as
	// given.
	Answer func(id string, v nodewire.WitnessVerdict) nodewire.WitnessVerdict
	witness.FakeDescriber

	mu      sync.Mutex
	beats   []Progress
	queries int
}

func (f *Fake) RecordActivityHeartbeat(_ context.Context, _ []byte, details ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats = append(f.beats, details[0].(Progress))
	return f.BeatErr
}

func (f *Fake) QueryWorkflow(_ context.Context, _, _, query string, args ...any) (converter.EncodedValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if query != nodewire.QueryFlipWitness || len(args) != 1 {
		return nil, errors.New("unexpected query " + query)
	}
	if len(f.Verdicts) == 0 {
		return nil, errors.New("no workflow answers")
	}
	v := f.Verdicts[min(f.queries, len(f.Verdicts)-1)]
	f.queries++
	if f.Answer != nil {
		id, _ := args[0].(string)
		v = f.Answer(id, v)
	}
	return answer{v}, nil
}

// Seen is what the fake was given so far: the heartbeats, and how many
// queries and describes it answered.
func (f *Fake) Seen() (beats []Progress, queries, describes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Progress(nil), f.beats...), f.queries, f.Reads()
}

// answer is a verdict as the query's result.
type answer struct{ v nodewire.WitnessVerdict }

func (a answer) HasValue() bool { return true }

func (a answer) Get(p any) error {
	vp, ok := p.(*nodewire.WitnessVerdict)
	if !ok {
		return errors.New("the witness query's answer is a WitnessVerdict")
	}
	*vp = a.v
	return nil
}
