package config

// This file holds the codec key: the one secret, named by
// temporal.codec_key_file, that encrypts payloads (package codec) and keys
// the plan's digests of environment values and declared content, so that
// neither can be read or guessed from a workflow history.

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
	b, err := io.ReadAll(io.LimitReader(f, 129))
	if err != nil {
		return bad(err.Error())
	}
	key, ok := parseCodecKey(b)
	if !ok {
		return bad(fmt.Sprintf("holds %d bytes; it must hold exactly 32 random bytes or 64 hex digits; %s", len(b), codecKeyHint(p)))
	}
	t.Key = key
	return ""
}

// parseCodecKey takes 32 raw bytes, or 64 hex digits (with one trailing
// newline, as `openssl rand -hex 32 > FILE` writes them).
func parseCodecKey(b []byte) ([]byte, bool) {
	if len(b) == 32 {
		return b, true
	}
	s := strings.TrimSuffix(string(b), "\n")
	if len(s) != 64 {
		return nil, false
	}
	k, err := hex.DecodeString(s)
	return k, err == nil
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
