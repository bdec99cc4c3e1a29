package custody

// This file holds the node's custody key: the hashes of found files that
// reach a workflow history are keyed with it (HMAC-SHA256), so a short
// secret in a found file cannot be guessed by hashing candidates. The key
// never leaves state_dir.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// digestPrefix names the digest's kind in its text.
const digestPrefix = "hmac-sha256:"

const keyLen = 32

// EnsureKey creates the node's custody key once (0600, 32 random bytes),
// creating state_dir (0700) if needed; an existing key is kept. The agent
// calls it at start so that the probe's hashes are keyed too.
func (s *Store) EnsureKey() error {
	if err := s.stateDir.Ensure(); err != nil {
		return err
	}
	_, err := s.ensureKey()
	return err
}

func (s *Store) ensureKey() ([]byte, error) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if k := s.loadKey(); k != nil {
		return k, nil
	}
	k := make([]byte, keyLen)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.keyPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		if k := s.loadKey(); k != nil {
			return k, nil // another process made it first
		}
		return nil, fmt.Errorf("custody key %s exists but is unreadable or not %d bytes; move it away and restart adopt-worker", s.keyPath, keyLen)
	}
	if err != nil {
		return nil, fmt.Errorf("create the custody key %s: %w", s.keyPath, err)
	}
	_, err = f.Write(k)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(s.keyPath)
		return nil, fmt.Errorf("write the custody key %s: %w", s.keyPath, err)
	}
	s.key = k
	return k, nil
}

// hmacKey is the key if it exists, else nil (the read-only probe of a node
// never adopted: nothing is keyed, and nothing plain is sent either).
func (s *Store) hmacKey() []byte {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	return s.loadKey()
}

// loadKey reads the key once; the caller holds keyMu.
func (s *Store) loadKey() []byte {
	if s.key != nil {
		return s.key
	}
	b, err := os.ReadFile(s.keyPath)
	if err != nil || len(b) != keyLen {
		return nil
	}
	s.key = b
	return b
}

// digest is the keyed hash of b, or "" without a key.
func (s *Store) digest(b []byte) string {
	k := s.hmacKey()
	if k == nil {
		return ""
	}
	m := hmac.New(sha256.New, k)
	m.Write(b)
	return digestPrefix + hex.EncodeToString(m.Sum(nil))
}

// Digest is the keyed hash of content as this node computes it: what a
// custody record's Digest would be for a file holding content.
func (s *Store) Digest(content []byte) string { return s.digest(content) }
