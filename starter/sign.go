// Signing: every request that changes a node carries an intent signed
// with the operator's SSH key (--sign-key FILE, else operator.sign_key of
// the configuration or ADOPT_OPERATOR_SIGN_KEY, else ssh-agent), naming the action, the node(s) and
// the hash of each node's plan as sent, the arguments and an expiry. The
// node acts only on an intent signed by a key in its own
// authority.operators. Read-only commands sign nothing.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/intent"
)

// signFlags are the persistent flags of signing.
type signFlags struct {
	key string        // --sign-key: a private key file, or a .pub to pick from ssh-agent
	ttl time.Duration // --intent-ttl: 0 takes operator.intent_ttl (or fleet_intent_ttl)
}

// signer opens the operator's signing key: --sign-key, else keyFile (the
// configuration's operator.sign_key), else ssh-agent. A .pub names the
// agent's key to use.
func (x *cli) signer(keyFile string) (ssh.Signer, func() error, error) {
	path := x.sign.key
	if path == "" {
		path = keyFile
	}
	if path != "" && !strings.HasSuffix(path, ".pub") {
		s, err := intent.SignerFromFile(path)
		return s, func() error { return nil }, err
	}
	pub := ""
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("signing key: %w", err)
		}
		pub = string(b)
	}
	return intent.SignerFromAgent(os.Getenv("SSH_AUTH_SOCK"), pub)
}

// canSign says whether a signing key is at hand at all.
func (x *cli) canSign(keyFile string) bool {
	return x.sign.key != "" || keyFile != "" || os.Getenv("SSH_AUTH_SOCK") != ""
}

// unsignedOK: every configuration says authority.unsigned and lists no
// operator, so its node acts without an intent.
func unsignedOK(cfgs ...*config.Config) bool {
	for _, c := range cfgs {
		if len(c.Authority.Operators) > 0 || !c.Authority.Unsigned {
			return false
		}
	}
	return true
}

// signIntent signs action for the nodes of cfgs (their plans' hashes as
// this CLI sends them) with args. When no key is at hand and every node
// takes unsigned requests, it signs nothing (nil).
func (x *cli) signIntent(action string, cfgs []*config.Config, args map[string]string, ttl time.Duration) (*intent.Signed, error) {
	keyFile := ""
	for _, c := range cfgs {
		if keyFile == "" {
			keyFile = c.Operator.SignKey
		}
	}
	targets := make([]intent.Target, 0, len(cfgs))
	for _, c := range cfgs {
		targets = append(targets, intent.Target{Node: c.Node.Name, PlanHash: c.Plan().Hash()})
	}
	return x.signTargets(action, targets, args, keyFile, ttl, unsignedOK(cfgs...))
}

// signTargets signs action for targets with the key at hand; unsigned
// says every target takes a request without one, so that a missing key
// is no reason to refuse.
func (x *cli) signTargets(action string, targets []intent.Target, args map[string]string, keyFile string, ttl time.Duration, unsigned bool) (*intent.Signed, error) {
	s, err := x.signAll(action, keyFile, ttl, unsigned, func(ttl time.Duration) ([]intent.Intent, error) {
		in, err := intent.New(action, targets, args, time.Now(), ttl)
		return []intent.Intent{in}, err
	})
	if s == nil || err != nil {
		return nil, err
	}
	return &s[0], nil
}

// signEach signs action for each node of cfgs apart (intent.Each): the
// intents of a fleet request, keyed by node, which the fleet sends on
// each to its node alone. nil when nothing is signed (as signIntent).
func (x *cli) signEach(action string, cfgs []*config.Config, args map[string]string, ttl time.Duration) (map[string]*intent.Signed, error) {
	keyFile := ""
	targets := make([]intent.Target, 0, len(cfgs))
	for _, c := range cfgs {
		if keyFile == "" {
			keyFile = c.Operator.SignKey
		}
		targets = append(targets, intent.Target{Node: c.Node.Name, PlanHash: c.Plan().Hash()})
	}
	s, err := x.signAll(action, keyFile, ttl, unsignedOK(cfgs...), func(ttl time.Duration) ([]intent.Intent, error) {
		return intent.Each(action, targets, args, time.Now(), ttl)
	})
	if s == nil || err != nil {
		return nil, err
	}
	out := make(map[string]*intent.Signed, len(s))
	for i := range s {
		out[targets[i].Node] = &s[i]
	}
	return out, nil
}

// signAll signs the intents build makes for the lifetime asked (--intent-ttl,
// else ttl) with one opening of the key at hand; nil when no key is at
// hand and unsigned says every node takes a request without one.
func (x *cli) signAll(action, keyFile string, ttl time.Duration, unsigned bool, build func(time.Duration) ([]intent.Intent, error)) ([]intent.Signed, error) {
	if !x.canSign(keyFile) && unsigned {
		return nil, nil
	}
	if x.sign.ttl != 0 {
		ttl = x.sign.ttl
	}
	ins, err := build(ttl)
	if err != nil {
		return nil, usagef("%v (--intent-ttl, operator.intent_ttl)", err)
	}
	s, done, err := x.signer(keyFile)
	if err != nil && unsigned {
		return nil, nil // every node takes it unsigned: an agent without the key is no reason to refuse
	}
	if err != nil {
		return nil, usagef("%s needs the operator's signature, and no key signs it: %v; give the private key with --sign-key FILE (or operator.sign_key, %s), or load it into ssh-agent", action, err, config.EnvVar("operator.sign_key"))
	}
	defer done()
	out := make([]intent.Signed, 0, len(ins))
	for _, in := range ins {
		signed, err := intent.Sign(in, s)
		if err != nil {
			return nil, err
		}
		out = append(out, signed)
	}
	return out, nil
}

// nodeIntent signs action for node with the arguments argsOf derives from
// the plan the intent binds. With the node's configuration given
// (--config), that is the plan it derives, which the request carries.
// Without it, the request carries no plan and the workflow acts on the one
// it holds: the intent binds that one, as the running workflow answers it
// (the node still acts only if it is its own file's). The key is then
// --sign-key, ADOPT_OPERATOR_SIGN_KEY or ssh-agent; with none at hand, or
// no answer from the workflow, the request goes unsigned, said on stderr:
// a node whose file lists operators refuses it.
func (x *cli) nodeIntent(ctx context.Context, node, action string, argsOf func(config.Plan) map[string]string) (*intent.Signed, error) {
	if x.configGiven() && x.load() == nil && x.cfg.Node.Name == node {
		return x.signIntent(action, []*config.Config{x.cfg}, argsOf(x.cfg.Plan()), x.cfg.Operator.IntentTTL)
	}
	op, err := config.OperatorFromEnv()
	if err != nil {
		return nil, usagef("%v", err)
	}
	unsigned := func(why string) (*intent.Signed, error) {
		if !x.asJSON { // else stderr carries only the JSON error
			fmt.Fprintf(x.stderr, "note: %s is sent unsigned: %s; node %s refuses it unless its file says authority.unsigned\n", action, why, node)
		}
		return nil, nil
	}
	if !x.canSign(op.SignKey) {
		return unsigned(fmt.Sprintf("no signing key at hand (no --sign-key, %s unset, no ssh-agent: SSH_AUTH_SOCK unset) and no configuration of node %s given (--config)", config.EnvVar("operator.sign_key"), node))
	}
	if err := x.dial(); err != nil {
		return nil, err
	}
	st, err := x.query(ctx, node, 10*time.Second)
	if err != nil {
		return unsigned(fmt.Sprintf("the plan to sign for could not be read from node %s's workflow (%v); give the node's configuration with --config", node, err))
	}
	return x.signTargets(action, []intent.Target{{Node: node, PlanHash: st.Plan.Hash()}}, argsOf(st.Plan), op.SignKey, op.IntentTTL, false)
}

// requestArgs are a node request's signed arguments, from the plan sent.
func requestArgs(name, module string, p config.Plan) map[string]string {
	switch {
	case name == authority.ActFlip:
		return authority.FlipArgs(p)
	case name == authority.ActPrune:
		return authority.PruneArgs(p)
	case module != "":
		return map[string]string{"module": module}
	}
	return nil
}
