package sandbox

// The operator's key of a sandbox run: every node's configuration trusts
// it (authority.operators) and names it for the CLI (operator.sign_key),
// so the requests of a demo or a test are signed as an operator's are.

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"adoption/internal/opkey"
)

// OperatorKeyEnv names a key written by opkey.Generate (its .pub beside
// it) for every node of a run: the demo generates one, the tests one per
// test binary. Unset, a process generates its own once.
const OperatorKeyEnv = "ADOPT_SANDBOX_OPERATOR_KEY"

// WitnessKeyEnv names the run's witness key, written by opkey.Generate as
// the operator's is: every node lists its public half (flip.witness.key),
// and the orchestrator signs its verdicts with it (--witness-key).
const WitnessKeyEnv = "ADOPT_SANDBOX_WITNESS_KEY"

// runKey is one key of a run: the one env names, else one generated once.
type runKey struct {
	env, name string
	once      sync.Once
	key       opkey.Key
	err       error
}

func (r *runKey) get() (opkey.Key, error) {
	r.once.Do(func() {
		if p := os.Getenv(r.env); p != "" {
			r.key, r.err = opkey.Load(p)
			return
		}
		dir, err := os.MkdirTemp("", "adoption-"+r.name+"-")
		if err != nil {
			r.err = err
			return
		}
		r.key, r.err = opkey.Generate(dir, r.name, "sandbox-"+r.name)
	})
	return r.key, r.err
}

var (
	operatorKey = &runKey{env: OperatorKeyEnv, name: "operator"}
	witnessKey  = &runKey{env: WitnessKeyEnv, name: "witness"}
)

// OperatorKey is the run's operator key.
func OperatorKey() (opkey.Key, error) { return operatorKey.get() }

// WitnessKey is the run's witness key.
func WitnessKey() (opkey.Key, error) { return witnessKey.get() }

var hasAuthority = regexp.MustCompile(`(?m)^authority:`)

// withOperator appends the run's operator key (and fleet, if any, as
// authority.fleet) to a node's configuration, unless the plan part says
// its own authority (a test of unsigned nodes).
func withOperator(body, fleet string) (string, error) {
	if hasAuthority.MatchString(body) {
		return body, nil
	}
	k, err := OperatorKey()
	if err != nil {
		return "", err
	}
	y := k.YAML()
	if fleet != "" {
		y = strings.Replace(y, "authority:\n", fmt.Sprintf("authority:\n  fleet: %q\n", fleet), 1)
	}
	return body + "\n" + y, nil
}
