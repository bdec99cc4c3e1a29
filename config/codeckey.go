package config

// This file holds the codec key: the one secret, named by
// temporal.codec_key_file, that encrypts payloads (package codec) and keys
// the plan's digests of environment values and declared content, so that
// neither can be read or guessed from a workflow history. The file may
// list several keys, one a line: the first encrypts and keys the digests,
// the others only decrypt, so that keys can be rotated (docs/access.md).

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// CodecKeyFileKey is the configuration key that names the codec key file.
const CodecKeyFileKey = "temporal.codec_key_file"

// Digest kinds a plan's digests are of.
const (
	// DigestSHA256 is the plain sha256 of the value, used when no codec key
	// is configured (and by every plan recorded before keys existed).
	DigestSHA256 = "sha256"
	// DigestHMAC is HMAC-SHA256 keyed by a key derived from the codec key.
	DigestHMAC = "hmac-sha256"
)

const digestLabel = "adoption plan digest v1"

// codecKeyHint says how to make a key file the loader accepts.
func codecKeyHint(p string) string {
	return fmt.Sprintf("generate one with: (umask 077; head -c 32 /dev/urandom > %s), and give the same file to the node agents, the orchestrator and the operator's CLI", p)
}

// loadCodecKey reads the file CodecKeyFile names into Key. It returns the
// problem, if any, naming the key, the value and what to do.
func (t *Temporal) loadCodecKey() string {
	p := t.CodecKeyFile
	if p == "" {
		return ""
	}
	bad := func(why string) string {
		return fmt.Sprintf("%s: %q is invalid: %s", CodecKeyFileKey, p, why)
	}
	if !filepath.IsAbs(p) {
		return bad("an absolute path of a 32-byte key file; " + codecKeyHint("/etc/adoption/codec.key"))
	}
	// Checked and read through one descriptor, so what is checked is what
	// is read; non-blocking, so a FIFO put there cannot hang the loader. A
	// symlink is followed: secret stores mount keys as links.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return bad(fmt.Sprintf("%v; %s", err, codecKeyHint(p)))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return bad(err.Error())
	}
	if !fi.Mode().IsRegular() {
		return bad("not a regular file; " + codecKeyHint(p))
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return bad(fmt.Sprintf("mode %04o lets others read the key; it must be 0600 or stricter: chmod 0600 %s", perm, p))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCodecKeyFile+1))
	if err != nil {
		return bad(err.Error())
	}
	keys, why := parseCodecKeys(b)
	if why != "" {
		return bad(why + "; " + codecKeyHint(p))
	}
	t.Key, t.OlderKeys = keys[0], keys[1:]
	return ""
}

// maxCodecKeyFile bounds the key file: 32 keys of 64 hex digits, with
// room for comments.
const maxCodecKeyFile = 4096

// parseCodecKeys takes 32 raw bytes (one key), or lines of 64 hex digits
// (as `openssl rand -hex 32` writes them), blank lines and # comments
// skipped: the first key is the current one.
func parseCodecKeys(b []byte) ([][]byte, string) {
	if len(b) > maxCodecKeyFile {
		return nil, fmt.Sprintf("is larger than %d bytes; it must hold 32 random bytes, or keys of 64 hex digits one a line", maxCodecKeyFile)
	}
	if len(b) == 32 {
		return [][]byte{b}, ""
	}
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := hex.DecodeString(line)
		if err != nil || len(k) != 32 {
			return nil, fmt.Sprintf("holds %d bytes; it must hold exactly 32 random bytes or 64 hex digits, or such keys of 64 hex digits one a line, the current one first (line %d is not)", len(b), i+1)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Sprintf("holds %d bytes and no key; it must hold exactly 32 random bytes or 64 hex digits", len(b))
	}
	return keys, ""
}

// digester computes the plan's digests of values: keyed when a codec key
// is configured, plain sha256 otherwise.
type digester struct{ key []byte }

func (t Temporal) digester() digester {
	if len(t.Key) == 0 {
		return digester{}
	}
	k, err := hkdf.Key(sha256.New, t.Key, nil, digestLabel, 32)
	if err != nil {
		panic(fmt.Sprintf("config: derive the digest key: %v", err)) // only for lengths hkdf refuses
	}
	return digester{key: k}
}

func (d digester) kind() string {
	if d.key == nil {
		return DigestSHA256
	}
	return DigestHMAC
}

func (d digester) sum(b []byte) string {
	if d.key == nil {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	m := hmac.New(sha256.New, d.key)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}
