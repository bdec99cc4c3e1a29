package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBadConfigChangesNothing runs every config of the bad-input corpus
// through both commands: each problem is named with its key and value, the
// exit is non-zero, and the node (its ruleset, its files, its state_dir) is
// exactly as before.
func TestBadConfigChangesNothing(t *testing.T) {
	needE2E(t)
	n := upNode(t, "e2ebad", 105, "127.0.0.1:1")
	files, err := filepath.Glob("testdata/bad-config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad-input corpus: %v", err)
	}
	state := filepath.Join(t.TempDir(), "state")
	before := nodeHash(t, n, state)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			body := strings.NewReplacer("{{NETNS}}", n.NetnsPath(), "{{ROOT}}", n.Root, "{{STATE}}", state).Replace(string(raw))
			cfg := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			var expects []string
			for _, line := range strings.Split(string(raw), "\n") {
				if e, ok := strings.CutPrefix(line, "# expect: "); ok {
					expects = append(expects, e)
				}
			}
			if len(expects) == 0 {
				t.Fatal("corpus file has no '# expect:' lines")
			}
			for _, run := range [][]string{
				{"adopt-worker", "probe", "--config", cfg},
				{"adopt-worker", "run", "--config", cfg},
				{"adopt", "start", "n1", "--config", cfg},
			} {
				_, errs, code := runBin(t, run[0], run[1:]...)
				if code == 0 {
					t.Errorf("%v accepted a bad config", run)
				}
				for _, e := range expects {
					if !strings.Contains(errs, e) {
						t.Errorf("%v: error lacks %q:\n%s", run, e, errs)
					}
				}
				if !strings.Contains(errs, "nothing was changed on the node") {
					t.Errorf("%v: error does not say the node is unchanged:\n%s", run, errs)
				}
			}
			if after := nodeHash(t, n, state); after != before {
				t.Fatalf("a bad config changed the node:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// nodeHash fingerprints what a bad input must not change: the ruleset, the
// files under the root (paths, modes, bytes), and whether state_dir exists.
func nodeHash(t *testing.T, n *node, state string) string {
	t.Helper()
	h := sha256.New()
	h.Write([]byte(ruleset(t, n)))
	hashTree(t, h, n.Root)
	if _, err := os.Stat(state); err == nil {
		h.Write([]byte("state_dir exists"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hashTree writes every path under dir, its mode and, for a regular file,
// its bytes into h.
func hashTree(t *testing.T, h hash.Hash, dir string) {
	t.Helper()
	hashTreeExcept(t, h, dir)
}

// hashTreeExcept is hashTree without the named top-level entries of dir.
func hashTreeExcept(t *testing.T, h hash.Hash, dir string, skip ...string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if filepath.Dir(p) == filepath.Clean(dir) && slices.Contains(skip, d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h.Write([]byte(p + info.Mode().String()))
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
