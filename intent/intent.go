// Package intent is the operator's signed word to a node: what to do, to
// which nodes and plans, until when, signed with an SSH key in the sshsig
// format git uses. It signs (the CLI) and verifies (the agent); it does
// not decide which actions need an intent, nor keep nonces (see Nonces).
package intent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Namespace is the sshsig namespace of every intent: a signature made for
// git, a file or another tool never verifies as an intent.
const Namespace = "adoption-intent@v1"

// hashAlg is the hash the signature covers the payload with.
const hashAlg = sshsig.HashSHA512

// MaxLifetime bounds Expires - Issued: an intent is a request for now, not
// a standing permission.
const MaxLifetime = 24 * time.Hour

// Target is one node an intent is for, with the hash of the plan the
// operator sent it (config.Plan.Hash): the node acts only on that plan.
type Target struct {
	Node     string `json:"node"`
	PlanHash string `json:"plan_hash"`
}

// Intent is what the operator asked. Args are the action's arguments
// (module, decisions, drop list, ...) as strings; a list is given by List.
type Intent struct {
	Action  string            `json:"action"`
	Targets []Target          `json:"targets"`
	Args    map[string]string `json:"args,omitempty"`
	Issued  time.Time         `json:"issued"`
	Expires time.Time         `json:"expires"`
	Nonce   string            `json:"nonce"`
}

// Signed is an intent as it travels: the exact bytes signed and the
// armored signature over them. Neither holds anything secret.
type Signed struct {
	Payload   []byte `json:"payload"`
	Signature []byte `json:"signature"`
}

// List is the canonical form of a list argument: sorted, comma-joined.
func List(vals []string) string {
	s := append([]string(nil), vals...)
	sort.Strings(s)
	return strings.Join(s, ",")
}

// New is an intent for action on targets, valid for ttl from now, with a
// fresh random nonce.
func New(action string, targets []Target, args map[string]string, now time.Time, ttl time.Duration) (Intent, error) {
	if ttl <= 0 || ttl > MaxLifetime {
		return Intent{}, fmt.Errorf("intent lifetime %s: it must be more than 0 and at most %s", ttl, MaxLifetime)
	}
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return Intent{}, fmt.Errorf("intent nonce: %w", err)
	}
	return Intent{Action: action, Targets: targets, Args: args, Issued: now.UTC().Truncate(time.Second),
		Expires: now.UTC().Add(ttl).Truncate(time.Second), Nonce: hex.EncodeToString(n[:])}, nil
}

// Each is one intent per target, each naming that target alone under its
// own nonce, with the same action, arguments, issue and expiry: what a
// request sent on to many nodes carries, so that each node is sent only
// its own (a few hundred bytes), never a list of every node. Each is a
// normal intent: a node verifies it as any other.
func Each(action string, targets []Target, args map[string]string, now time.Time, ttl time.Duration) ([]Intent, error) {
	out := make([]Intent, 0, len(targets))
	for _, t := range targets {
		in, err := New(action, []Target{t}, args, now, ttl)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// Sign encodes in and signs it with signer (a key file's or ssh-agent's).
func Sign(in Intent, signer ssh.Signer) (Signed, error) {
	if err := in.wellFormed(); err != nil {
		return Signed{}, err
	}
	payload, err := json.Marshal(in)
	if err != nil {
		return Signed{}, fmt.Errorf("encode intent: %w", err)
	}
	sig, err := sshsig.Sign(bytes.NewReader(payload), signer, hashAlg, Namespace)
	if err != nil {
		return Signed{}, fmt.Errorf("sign intent with %s key %s: %w", signer.PublicKey().Type(), ssh.FingerprintSHA256(signer.PublicKey()), err)
	}
	return Signed{Payload: payload, Signature: sshsig.Armor(sig)}, nil
}

func (in Intent) wellFormed() error {
	switch {
	case in.Action == "":
		return errors.New("intent has no action")
	case len(in.Targets) == 0:
		return errors.New("intent names no node")
	case len(in.Nonce) < 16:
		return errors.New("intent has no nonce (at least 16 characters)")
	case !in.Expires.After(in.Issued):
		return fmt.Errorf("intent expires (%s) before it is issued (%s)", in.Expires.Format(time.RFC3339), in.Issued.Format(time.RFC3339))
	case in.Expires.Sub(in.Issued) > MaxLifetime:
		return fmt.Errorf("intent is valid for %s, more than the %s an intent may live", in.Expires.Sub(in.Issued), MaxLifetime)
	}
	return nil
}

// Refusal is why a node refuses an intent: Reason is a short word for
// metrics and tests, the error text says it to the operator.
type Refusal struct {
	Reason string
	Msg    string
}

func (r *Refusal) Error() string { return "intent refused (" + r.Reason + "): " + r.Msg }

// Reasons a node gives for refusing an intent.
const (
	NoIntent     = "missing"
	Malformed    = "malformed"
	UnknownKey   = "unknown-key"
	BadSignature = "bad-signature"
	WrongNode    = "wrong-node"
	WrongPlan    = "wrong-plan"
	WrongAction  = "wrong-action"
	WrongArgs    = "wrong-args"
	Expired      = "expired"
	Replayed     = "replayed"
)

func refuse(reason, format string, args ...any) error {
	return &Refusal{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Want is what the node is about to do, which the intent must name.
type Want struct {
	Node     string
	PlanHash string
	// Actions the intent may name (a confirm may be done under the flip's
	// intent, so one request can accept more than one).
	Actions []string
	// Args the intent must carry with exactly these values; an argument
	// the intent has and Want does not name is refused too.
	Args map[string]string
}

// Verified is an intent that passed: who signed it and what it says.
type Verified struct {
	Intent
	Key     ssh.PublicKey
	Comment string // the operator's line comment in authority.operators
}

// Verify checks s against the operators' keys and what the node is about
// to do, at now. It does not check the nonce: Nonces.Claim does.
func Verify(s *Signed, ops *Operators, want Want, now time.Time) (*Verified, error) {
	if s == nil || len(s.Payload) == 0 {
		return nil, refuse(NoIntent, "the request carries no signed intent; an operator signs each request with their SSH key (adopt --sign-key FILE, or ssh-agent; a signal sent from the Web UI or the temporal CLI takes its input from adopt sign ACTION NODE)")
	}
	sig, err := sshsig.Unarmor(s.Signature)
	if err != nil {
		return nil, refuse(Malformed, "the signature cannot be read: %v", err)
	}
	if sig.Namespace != Namespace {
		return nil, refuse(BadSignature, "the signature is for %q, not for %q", sig.Namespace, Namespace)
	}
	op, ok := ops.find(sig.PublicKey)
	if !ok {
		return nil, refuse(UnknownKey, "key %s is not in authority.operators of node %s", ssh.FingerprintSHA256(sig.PublicKey), want.Node)
	}
	if err := sshsig.Verify(bytes.NewReader(s.Payload), sig, op.Key, sig.HashAlgorithm, Namespace); err != nil {
		return nil, refuse(BadSignature, "the signature by %s does not match the intent: %v", ssh.FingerprintSHA256(op.Key), err)
	}
	var in Intent
	dec := json.NewDecoder(bytes.NewReader(s.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, refuse(Malformed, "the signed intent cannot be decoded: %v", err)
	}
	if err := in.wellFormed(); err != nil {
		return nil, refuse(Malformed, "%v", err)
	}
	if err := in.matches(want, now); err != nil {
		return nil, err
	}
	return &Verified{Intent: in, Key: op.Key, Comment: op.Comment}, nil
}

func (in Intent) matches(want Want, now time.Time) error {
	if now.Before(in.Issued.Add(-time.Minute)) {
		return refuse(Expired, "the intent is issued at %s, in the future of node %s's clock (%s)", in.Issued.Format(time.RFC3339), want.Node, now.UTC().Format(time.RFC3339))
	}
	if !now.Before(in.Expires) {
		return refuse(Expired, "the intent expired at %s (now %s); sign the request again", in.Expires.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	var target *Target
	for i := range in.Targets {
		if in.Targets[i].Node == want.Node {
			target = &in.Targets[i]
		}
	}
	if target == nil {
		nodes := make([]string, 0, len(in.Targets))
		for _, t := range in.Targets {
			nodes = append(nodes, t.Node)
		}
		return refuse(WrongNode, "the intent is for %s, not for node %s", strings.Join(nodes, ", "), want.Node)
	}
	if target.PlanHash != want.PlanHash {
		return refuse(WrongPlan, "the intent is for node %s's plan %.12s, but the node's plan is %.12s", want.Node, target.PlanHash, want.PlanHash)
	}
	allowed := false
	for _, a := range want.Actions {
		allowed = allowed || a == in.Action
	}
	if !allowed {
		return refuse(WrongAction, "the intent asks to %s, not to %s", in.Action, strings.Join(want.Actions, " or "))
	}
	for k, v := range want.Args {
		if got, ok := in.Args[k]; !ok || got != v {
			return refuse(WrongArgs, "the intent's %s is %q, the request's is %q", k, got, v)
		}
	}
	for k := range in.Args {
		if _, ok := want.Args[k]; !ok {
			return refuse(WrongArgs, "the intent carries %s=%q, which this request does not", k, in.Args[k])
		}
	}
	return nil
}

// Digest identifies a signed intent (its payload), for the nonce record.
func (s *Signed) Digest() string {
	return fmt.Sprintf("%x", sha512sum(s.Payload))
}
