package config

import (
	"bytes"
	"strings"
	"testing"
)

// TestCodecKeysRotate: a key file may list several keys, one a line: the
// first is the current one (it encrypts, and keys the plan's digests), the
// others only decrypt. Adding an older key below changes nothing in the
// plan; making a new key the first changes its digests (a plan change,
// applied with adopt retry --config).
func TestCodecKeysRotate(t *testing.T) {
	oldKey, newKey := strings.Repeat("0a", 32), strings.Repeat("0b", 32)
	load := func(body string) *Config {
		t.Helper()
		c, err := Load(write(t, strings.Replace(keyedNode, "%s", keyFile(t, []byte(body), 0o600), 1)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := load(oldKey + "\n")
	added := load(oldKey + "\n# the next key, decrypting only until it is moved first\n" + newKey + "\n")
	if !bytes.Equal(added.Temporal.Key, before.Temporal.Key) || len(added.Temporal.OlderKeys) != 1 || !bytes.Equal(added.Temporal.OlderKeys[0], bytes.Repeat([]byte{0x0b}, 32)) {
		t.Fatalf("keys: current %x, older %x", added.Temporal.Key, added.Temporal.OlderKeys)
	}
	if d := Diff(before.Plan(), added.Plan()); d != nil {
		t.Fatalf("a key listed below the current one changed the plan at %s", d.Key)
	}
	promoted := load(newKey + "\n" + oldKey + "\n")
	if !bytes.Equal(promoted.Temporal.Key, bytes.Repeat([]byte{0x0b}, 32)) {
		t.Fatalf("current key %x", promoted.Temporal.Key)
	}
	if d := Diff(before.Plan(), promoted.Plan()); d == nil || !strings.Contains(d.Key, "env") {
		t.Fatalf("a new current key left the digests as they were (%v)", d)
	}
	for name, body := range map[string]string{
		"a short line":  oldKey + "\nabcd\n",
		"not hex":       strings.Repeat("zz", 32),
		"comments only": "# no key\n",
	} {
		_, err := Load(write(t, strings.Replace(keyedNode, "%s", keyFile(t, []byte(body), 0o600), 1)))
		if err == nil || !strings.Contains(err.Error(), CodecKeyFileKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
