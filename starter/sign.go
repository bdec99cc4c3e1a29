// Signing: every request that changes a node carries an intent signed
// with the operator's SSH key (--sign-key FILE, else operator.sign_key of
// the configuration, else ssh-agent), naming the action, the node(s) and
// the hash of each node's plan as sent, the arguments and an expiry. The
// node acts only on an intent signed by a key in its own
// authority.operators. Read-only commands sign nothing.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"adoption/activities"
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
	if !x.canSign(keyFile) && unsignedOK(cfgs...) {
		return nil, nil
	}
	if x.sign.ttl != 0 {
		ttl = x.sign.ttl
	}
	targets := make([]intent.Target, 0, len(cfgs))
	for _, c := range cfgs {
		targets = append(targets, intent.Target{Node: c.Node.Name, PlanHash: c.Plan().Hash()})
	}
	in, err := intent.New(action, targets, args, time.Now(), ttl)
	if err != nil {
		return nil, usagef("%v (--intent-ttl, operator.intent_ttl)", err)
	}
	s, done, err := x.signer(keyFile)
	if err != nil && unsignedOK(cfgs...) {
		return nil, nil // every node takes it unsigned: an agent without the key is no reason to refuse
	}
	if err != nil {
		return nil, usagef("%s needs the operator's signature, and no key signs it: %v; give the private key with --sign-key FILE (or operator.sign_key), or load it into ssh-agent", action, err)
	}
	defer done()
	signed, err := intent.Sign(in, s)
	if err != nil {
		return nil, err
	}
	return &signed, nil
}

// nodeIntent signs action with args for node, whose configuration must be
// the one given (--config): the intent binds the node's plan as sent.
// Without it the request goes unsigned, said on stderr: a node whose file
// lists operators refuses it.
func (x *cli) nodeIntent(node, action string, args map[string]string) (*intent.Signed, error) {
	if !x.configGiven() || x.load() != nil || x.cfg.Node.Name != node {
		if x.asJSON {
			return nil, nil // stderr carries only the JSON error
		}
		fmt.Fprintf(x.stderr, "note: no configuration of node %s given (--config), so %s is sent unsigned: the node refuses it unless its file says authority.unsigned\n", node, action)
		return nil, nil
	}
	return x.signIntent(action, []*config.Config{x.cfg}, args, x.cfg.Operator.IntentTTL)
}

// requestArgs are a node request's signed arguments, from the plan sent.
func requestArgs(name, module string, p config.Plan) map[string]string {
	switch {
	case name == activities.ActFlip:
		return activities.FlipArgs(p)
	case name == activities.ActPrune:
		return activities.PruneArgs(p)
	case module != "":
		return map[string]string{"module": module}
	}
	return nil
}
