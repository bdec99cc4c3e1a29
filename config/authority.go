package config

// This file holds who may make the node act: the operators' public keys
// whose signed intents the agent accepts (authority.operators, as in
// authorized_keys), or, said explicitly, nobody's signature at all
// (authority.unsigned); the fleet that may read its plan
// (authority.fleet); and the operator's side: the key the CLI signs
// with and how long an intent it signs lives.

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"adoption/intent"
)

// KeyLines are authorized_keys lines: the YAML may give them as one block
// string (operators: |) or as a list of strings.
type KeyLines []string

// Text is the lines as one authorized_keys text.
func (k KeyLines) Text() string { return strings.Join(k, "\n") }

// keyLinesHook splits a block string into its lines for a KeyLines field
// (StringToSliceHookFunc would split it on commas, which a comment may hold).
func keyLinesHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(KeyLines{}) || from.Kind() != reflect.String {
		return data, nil
	}
	return strings.Split(data.(string), "\n"), nil
}

// OperatorPlaceholder opens the line the shipped example holds under
// authority.operators: it is no key, so a copied example is refused until
// an operator's real public key replaces it, and nobody's key is trusted by
// accident.
const OperatorPlaceholder = "REPLACE-ME"

// Authority is whose word the node acts on.
type Authority struct {
	// Operators are the public keys whose signed intents the node accepts.
	Operators KeyLines `mapstructure:"operators" json:"operators,omitempty"`
	// Unsigned, set explicitly and with no operators listed, lets the
	// node act on requests that carry no intent (with operators listed,
	// every request must be signed whatever it says): anyone with access to the Temporal namespace can then
	// make it act. Only for a sandbox or a first trial.
	Unsigned bool `mapstructure:"unsigned" json:"unsigned,omitempty"`
	// Fleet names the fleet (its name: in the fleet file) whose workflow
	// may read this node's plan before the node's own workflow adopts it;
	// empty, no fleet may.
	Fleet string `mapstructure:"fleet" json:"fleet,omitempty"`
}

// Keys parses authority.operators (validated at load, so an error here
// means the configuration was not validated).
func (a Authority) Keys() (*intent.Operators, error) {
	return intent.ParseOperators(a.Operators.Text())
}

// Operator is the operator's side of the file, read by the CLI only.
type Operator struct {
	// SignKey is the private key file the CLI signs intents with (else
	// --sign-key, else ssh-agent).
	SignKey string `mapstructure:"sign_key" json:"sign_key,omitempty"`
	// IntentTTL is how long a node request's intent is valid.
	IntentTTL time.Duration `mapstructure:"intent_ttl" json:"intent_ttl"`
	// FleetIntentTTL is how long a fleet's intent is valid: it covers
	// every node the fleet starts, so it lives longer.
	FleetIntentTTL time.Duration `mapstructure:"fleet_intent_ttl" json:"fleet_intent_ttl"`
}

// OperatorFromEnv is operator.* from the defaults and the ADOPT_*
// environment alone: the CLI's side when no configuration file is given.
func OperatorFromEnv() (Operator, error) {
	get := func(k string) string {
		if s, ok := os.LookupEnv(EnvVar(k)); ok {
			return s
		}
		return fmt.Sprint(defaults[k])
	}
	o := Operator{SignKey: get("operator.sign_key")}
	for k, d := range map[string]*time.Duration{"operator.intent_ttl": &o.IntentTTL, "operator.fleet_intent_ttl": &o.FleetIntentTTL} {
		var err error
		if *d, err = ParseDuration(get(k)); err != nil {
			return o, fmt.Errorf("%s (%s): %w", EnvVar(k), k, err)
		}
	}
	v := &validator{}
	v.authority(Authority{Unsigned: true}, o)
	if len(v.problems) > 0 {
		return o, fmt.Errorf("%s", strings.Join(v.problems, "; "))
	}
	return o, nil
}

// authority checks authority.* and operator.*.
func (v *validator) authority(a Authority, o Operator) {
	keys, placeholders := 0, 0
	for i, line := range a.Operators {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasPrefix(t, OperatorPlaceholder) {
			placeholders++
			v.add(fmt.Sprintf("authority.operators line %d", i+1), t, "the example's placeholder, not a key: replace the line with the public key line of each operator whose signed requests this node acts on (the content of their ~/.ssh/id_ed25519.pub, e.g. `ssh-ed25519 AAAA... alice@laptop`)")
			continue
		}
		if _, err := intent.ParseOperators(t); err != nil {
			why := err.Error()
			if _, rest, ok := strings.Cut(why, ": "); ok && strings.HasPrefix(why, "authority.operators line") {
				why = rest
			}
			shown := t
			if len(shown) > 40 {
				shown = shown[:40] + "..."
			}
			v.add(fmt.Sprintf("authority.operators line %d", i+1), shown, why+"; copy the operator's public key line (the .pub file, e.g. ~/.ssh/id_ed25519.pub) as it is")
			continue
		}
		keys++
	}
	switch {
	case keys == 0 && !a.Unsigned && placeholders == 0:
		v.add("authority.operators", a.Operators.Text(), "no operator key: list the public keys (authorized_keys lines, e.g. the content of ~/.ssh/id_ed25519.pub) whose signed requests this node acts on; "+
			"or, for a sandbox only, say authority.unsigned: true (then anyone with access to the Temporal namespace can make the node act)")
	}
	if a.Fleet != "" && !ValidName(a.Fleet) {
		v.add("authority.fleet", a.Fleet, "a fleet's name (name: in its fleet file), which must be "+NameRule+"; or leave it out when no fleet starts this node")
	}
	v.duration("operator.intent_ttl", o.IntentTTL)
	v.duration("operator.fleet_intent_ttl", o.FleetIntentTTL)
}
