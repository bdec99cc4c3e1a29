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

var (
	keyOnce sync.Once
	key     opkey.Key
	keyErr  error
)

// OperatorKey is the run's operator key.
func OperatorKey() (opkey.Key, error) {
	keyOnce.Do(func() {
		if p := os.Getenv(OperatorKeyEnv); p != "" {
			key, keyErr = opkey.Load(p)
			return
		}
		dir, err := os.MkdirTemp("", "adoption-operator-")
		if err != nil {
			keyErr = err
			return
		}
		key, keyErr = opkey.Generate(dir, "operator", "sandbox-operator")
	})
	return key, keyErr
}

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
