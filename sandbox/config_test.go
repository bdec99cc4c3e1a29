package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"adoption/config"
)

// The configurations adopt-sandbox writes name the codec key when given
// one, and load with it.
func TestWrittenConfigsNameTheCodecKey(t *testing.T) {
	key := filepath.Join(t.TempDir(), "codec.key")
	if err := os.WriteFile(key, bytes.Repeat([]byte{1}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec := Spec{Name: "n1", Index: 1, Dir: dir, CodecKeyFile: key}
	ref := NewRef(RefSpec{Spec: spec, Temporal: "127.0.0.1:7233"})
	plain := New(Spec{Name: "n2", Index: 2, Dir: t.TempDir()})
	for _, n := range []*Node{ref.Node, plain} {
		if err := os.MkdirAll(n.ConfigDir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A plan part with its own authority: the run's operator key (cached
	// once per process) is another test's business.
	const plan = "authority:\n  unsigned: true\n"
	refPath, err := ref.WriteConfig(plan)
	if err != nil {
		t.Fatal(err)
	}
	plainPath, err := plain.WriteConfig("127.0.0.1:7233", plan)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(refPath)
	if err != nil {
		t.Fatal(err)
	}
	if c.Temporal.CodecKeyFile != key || len(c.Temporal.Key) != 32 || c.Plan().Digests != config.DigestHMAC {
		t.Fatalf("reference node: codec_key_file %q, key %d bytes, digests %q", c.Temporal.CodecKeyFile, len(c.Temporal.Key), c.Plan().Digests)
	}
	c, err = config.Load(plainPath)
	if err != nil {
		t.Fatal(err)
	}
	if c.Temporal.CodecKeyFile != "" || c.Plan().Digests != config.DigestSHA256 {
		t.Fatalf("no key given, yet: %q %q", c.Temporal.CodecKeyFile, c.Plan().Digests)
	}
	// Its flips are witnessed from its peer namespace, where its clients are.
	if w := c.Plan().Witness; w == nil || w.Netns != "/run/netns/"+plain.Peer || w.Address != plain.Addr || w.Address == "" {
		t.Fatalf("plain node's witness %+v; want %s from /run/netns/%s", w, plain.Addr, plain.Peer)
	}
}
