package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func keyFile(t *testing.T, body []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "codec.key")
	if err := os.WriteFile(p, body, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func fifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo.key")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const keyedNode = `
temporal: {codec_key_file: %s}
node: {name: n1}
node_files: [{path: /etc/motd, content: "hello"}]
modules:
  - name: db
    ports: ["5432/tcp"]
    container: {name: db, image: "postgres:16", env: ["POSTGRES_PASSWORD=hunter2"]}
`

func TestCodecKeyFileAccepted(t *testing.T) {
	raw := bytes.Repeat([]byte{0xab}, 32)
	for name, body := range map[string][]byte{
		"32 raw bytes":        raw,
		"64 hex digits":       []byte(strings.Repeat("ab", 32)),
		"64 hex and new line": []byte(strings.Repeat("ab", 32) + "\n"),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Load(write(t, strings.Replace(keyedNode, "%s", keyFile(t, body, 0o600), 1)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.Temporal.Key, raw) {
				t.Fatalf("key %x", c.Temporal.Key)
			}
		})
	}
	if _, err := Load(write(t, strings.Replace(keyedNode, "%s", keyFile(t, raw, 0o400), 1))); err != nil {
		t.Fatalf("a 0400 key: %v", err)
	}
}

func TestCodecKeyFileRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"missing", filepath.Join(dir, "none.key"), []string{"no such file", "head -c 32 /dev/urandom"}},
		{"readable by others", keyFile(t, make([]byte, 32), 0o644), []string{"mode 0644", "chmod 0600"}},
		{"group-readable", keyFile(t, make([]byte, 32), 0o640), []string{"mode 0640", "0600 or stricter"}},
		{"too short", keyFile(t, make([]byte, 16), 0o600), []string{"holds 16 bytes", "exactly 32 random bytes or 64 hex digits"}},
		{"not hex", keyFile(t, []byte(strings.Repeat("zz", 32)), 0o600), []string{"holds 64 bytes"}},
		{"relative", "codec.key", []string{"an absolute path"}},
		{"a directory", dir, []string{"not a regular file"}},
		{"a FIFO", fifo(t), []string{"not a regular file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, strings.Replace(keyedNode, "%s", tc.path, 1)))
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range append([]string{"temporal.codec_key_file: " + `"` + tc.path + `"`}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// With a codec key the plan's digests are keyed, say so, and the node's
// own Contents finds each value by them; without one they are plain
// sha256, and the plan says that too.
func TestPlanDigestsKeyedByTheCodecKey(t *testing.T) {
	plain := sha256.Sum256([]byte("hunter2"))
	withKey, err := Load(write(t, strings.Replace(keyedNode, "%s", keyFile(t, bytes.Repeat([]byte{7}, 32), 0o600), 1)))
	if err != nil {
		t.Fatal(err)
	}
	noKey, err := Load(write(t, strings.Replace(keyedNode, "temporal: {codec_key_file: %s}", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	pk, pn := withKey.Plan(), noKey.Plan()
	if pk.Digests != DigestHMAC || pn.Digests != DigestSHA256 {
		t.Fatalf("digest kinds: keyed %q, plain %q", pk.Digests, pn.Digests)
	}
	kd, nd := pk.Modules[0].Container.EnvSHA256["POSTGRES_PASSWORD"], pn.Modules[0].Container.EnvSHA256["POSTGRES_PASSWORD"]
	if nd != hex.EncodeToString(plain[:]) {
		t.Fatalf("without a key the digest is %s, not sha256", nd)
	}
	if kd == nd || len(kd) != 64 || strings.Contains(toJSON(t, pk), nd) {
		t.Fatalf("with a key the digest %s is the plain sha256 or malformed", kd)
	}
	if string(withKey.Contents()[kd]) != "hunter2" || string(withKey.Contents()[pk.NodeFiles[0].SHA256]) != "hello" {
		t.Fatal("the node's Contents does not hold the values by their keyed digests")
	}
	// Another key gives other digests: the plans differ, by the digests.
	other, err := Load(write(t, strings.Replace(keyedNode, "%s", keyFile(t, bytes.Repeat([]byte{8}, 32), 0o600), 1)))
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(pk, other.Plan()); d == nil {
		t.Fatal("plans under two keys compare equal")
	}
	if d := Diff(pk, pn); d == nil {
		t.Fatal("a keyed and a plain plan compare equal")
	}
	// A plan recorded before digest kinds existed equals today's plain one.
	old := pn
	old.Digests = ""
	if d := Diff(old, pn); d != nil {
		t.Fatalf("an older plain plan differs at %s", d.Key)
	}
}

// A fleet file that names no codec key uses its nodes' when they share
// one, so the fleet's requests are encrypted as the nodes' are.
func TestFleetUsesItsNodesSharedKey(t *testing.T) {
	key := keyFile(t, bytes.Repeat([]byte{9}, 32), 0o600)
	dir := t.TempDir()
	node := func(name, keyLine string) string {
		p := filepath.Join(dir, name+".yaml")
		body := "node: {name: " + name + "}\nauthority: {unsigned: true}\n"
		if keyLine != "" {
			body = "temporal: {codec_key_file: " + keyLine + "}\n" + body
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fleet := func(nodes ...string) *Fleet {
		p := filepath.Join(dir, "fleet.yaml")
		if err := os.WriteFile(p, []byte("name: f1\nnodes: ["+strings.Join(nodes, ", ")+"]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := LoadFleet(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := fleet(node("n1", key), node("n2", key)); f.Temporal.CodecKeyFile != key || len(f.Temporal.Key) != 32 {
		t.Fatalf("shared key not used: %q", f.Temporal.CodecKeyFile)
	}
	if f := fleet(node("n1", key), node("n2", "")); f.Temporal.CodecKeyFile != "" || f.Temporal.Key != nil {
		t.Fatalf("a key not shared by every node was used: %q", f.Temporal.CodecKeyFile)
	}
}
