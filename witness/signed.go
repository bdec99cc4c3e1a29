// The witness's word, signed: a verdict names the node, the flip, the plan
// the flip was made under and when the witness gave it, and is signed with
// the witness's own SSH key (sshsig, as intents are, under its own
// namespace). The node lists that key's public half (flip.witness.key) and
// takes an "answered" only with a signature it verifies, for its own flip,
// plan and this attempt: neither a workflow, nor a poller, nor anyone
// reading or writing histories (the codec key included) holds the key.
package witness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Namespace is the sshsig namespace of a verdict: an operator's intent, a
// git signature or a file's never verifies as one.
const Namespace = "adoption-witness@v1"

// skew is how far the witness's clock may be from the node's.
const skew = time.Minute

// signed is the part of a verdict the signature covers.
type signed struct {
	Node  string    `json:"node"`
	ID    string    `json:"id"`
	Plan  string    `json:"plan"`
	State string    `json:"state"`
	Why   string    `json:"why,omitempty"`
	At    time.Time `json:"at"`
}

func (v Verdict) payload() ([]byte, error) {
	return json.Marshal(signed{Node: v.Node, ID: v.ID, Plan: v.Plan, State: v.State, Why: v.Why, At: v.At.UTC()})
}

// Sign binds v to node, plan and now, and signs it with s.
func (v Verdict) Sign(s ssh.Signer, node, plan string, now time.Time) (Verdict, error) {
	v.Node, v.Plan, v.At = node, plan, now.UTC().Truncate(time.Millisecond)
	p, err := v.payload()
	if err != nil {
		return v, err
	}
	sig, err := sshsig.Sign(bytes.NewReader(p), s, sshsig.HashSHA512, Namespace)
	if err != nil {
		return v, fmt.Errorf("sign the verdict with %s: %w", ssh.FingerprintSHA256(s.PublicKey()), err)
	}
	v.Sig = sshsig.Armor(sig)
	return v, nil
}

// Want is what a node takes a verdict for: its own name, its flip's ID,
// its own plan's hash, and the time the flip began (a verdict given before
// it belongs to another attempt).
type Want struct {
	Node, ID, Plan string
	Since          time.Time
}

// Authentic checks that v is signed by one of keys (the node's
// flip.witness.key) and says what want says, at now. The error says why
// not.
func (v Verdict) Authentic(keys []ssh.PublicKey, want Want, now time.Time) error {
	if len(keys) == 0 {
		return errors.New("this node lists no witness key (flip.witness.key): no verdict can be authenticated")
	}
	if len(v.Sig) == 0 {
		return errors.New("the verdict is not signed")
	}
	sig, err := sshsig.Unarmor(v.Sig)
	if err != nil {
		return fmt.Errorf("the verdict's signature cannot be read: %v", err)
	}
	var key ssh.PublicKey
	for _, k := range keys {
		if bytes.Equal(k.Marshal(), sig.PublicKey.Marshal()) {
			key = k
		}
	}
	if key == nil {
		return fmt.Errorf("the verdict is signed by %s, not by a key of flip.witness.key", ssh.FingerprintSHA256(sig.PublicKey))
	}
	p, err := v.payload()
	if err != nil {
		return err
	}
	if err := sshsig.Verify(bytes.NewReader(p), sig, key, sig.HashAlgorithm, Namespace); err != nil {
		return fmt.Errorf("the verdict's signature by %s does not verify: %v", ssh.FingerprintSHA256(key), err)
	}
	switch {
	case v.Node != want.Node:
		return fmt.Errorf("the verdict is for node %q, not %s", v.Node, want.Node)
	case v.ID != want.ID:
		return fmt.Errorf("the verdict is on flip %q, not %s", v.ID, want.ID)
	case v.Plan != want.Plan:
		return fmt.Errorf("the verdict is for plan %.12s, not the node's %.12s", v.Plan, want.Plan)
	case v.At.Before(want.Since.Add(-skew)):
		return fmt.Errorf("the verdict was given at %s, before this flip began (%s)", v.At.Format(time.RFC3339), want.Since.UTC().Format(time.RFC3339))
	case v.At.After(now.Add(skew)):
		return fmt.Errorf("the verdict was given at %s, in the future of the node's clock (%s)", v.At.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}
