// Package codec encrypts Temporal payloads with AES-256-GCM, so that a
// workflow history holds ciphertext, and serves the decoding to the Web UI
// for those who hold the key (server.go). A payload that is not encrypted
// is refused: once a key is set, nothing in clear is trusted, a heartbeat
// or a query answer written by someone without the key included; one
// encrypted with an older key decodes while that key is still listed.
// Only what displays or replays, and acts on nothing (the Web UI's codec
// server, a replay of histories recorded before the key), passes plaintext
// through (Lenient).
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

const (
	// Encoding is the metadata encoding of an encrypted payload (as in
	// Temporal's samples-go encryption sample).
	Encoding = "binary/encrypted"
	// MetadataKeyID names the key a payload was encrypted with, so a
	// decoder holding another key says so instead of "authentication failed".
	MetadataKeyID = "encryption-key-id"

	// Labels of the keys derived from the one secret: each use has its own.
	encryptionLabel = "adoption payload encryption v1"
	keyIDLabel      = "adoption key id v1"
)

// Codec is a converter.PayloadCodec that encrypts every payload with its
// current key and decrypts with any key it holds (a rotation's older ones).
type Codec struct {
	keyID string
	aead  cipher.AEAD
	// decrypt holds every key by ID, the current one included.
	decrypt map[string]cipher.AEAD
	// lenient passes payloads in clear through instead of refusing them.
	lenient bool
}

// refused counts the payloads in clear every strict codec of the process
// refused: adoption_codec_plaintext_refused_total (metrics).
var refused atomic.Uint64

// PlaintextRefused is how many payloads in clear the process's codecs
// refused since it started.
func PlaintextRefused() uint64 { return refused.Load() }

// ErrPlaintext is the error type (errors.As) of a payload refused for
// being in clear.
type ErrPlaintext struct{ Encoding string }

func (e *ErrPlaintext) Error() string {
	return fmt.Sprintf("codec: refused a payload in clear (encoding %q): temporal.codec_key_file is set, so every payload must be encrypted with its key; "+
		"whoever wrote it does not hold the key (a client, worker or CLI without temporal.codec_key_file, or one forging it): give it the key file the workers use", e.Encoding)
}

// Lenient is a copy of c that passes payloads in clear through unchanged,
// for what only displays or replays them: the Web UI's codec server, a
// replay of histories recorded before the key was set. Nothing that acts
// on a payload uses it.
func (c *Codec) Lenient() *Codec {
	l := *c
	l.lenient = true
	return &l
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New builds the codec for a 32-byte secret (the first key of the file
// temporal.codec_key_file names), which encrypts, and older secrets (the
// file's other keys), which only decrypt. The AES keys are derived from
// them, not the secrets themselves, so the same secret can also key the
// plan's digests.
func New(secret []byte, older ...[]byte) (*Codec, error) {
	c := &Codec{keyID: KeyID(secret), decrypt: map[string]cipher.AEAD{}}
	for i, s := range append([][]byte{secret}, older...) {
		aead, err := aeadOf(s)
		if err != nil {
			return nil, fmt.Errorf("codec: key %d: %w", i+1, err)
		}
		if i == 0 {
			c.aead = aead
		}
		c.decrypt[KeyID(s)] = aead
	}
	return c, nil
}

func aeadOf(secret []byte) (cipher.AEAD, error) {
	if len(secret) != 32 {
		return nil, fmt.Errorf("the key is %d bytes; it must be 32", len(secret))
	}
	k, err := hkdf.Key(sha256.New, secret, nil, encryptionLabel, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// KeyID names a secret without revealing it: 16 hex digits derived from it.
func KeyID(secret []byte) string {
	id, err := hkdf.Key(sha256.New, secret, nil, keyIDLabel, 8)
	if err != nil {
		panic(fmt.Sprintf("codec: key id: %v", err)) // only for lengths hkdf refuses
	}
	return hex.EncodeToString(id)
}

// KeyID is the ID of the codec's key, as its payloads carry it.
func (c *Codec) KeyID() string { return c.keyID }

// Encode encrypts each payload whole (its metadata included). The key ID is
// authenticated with it, so a payload relabelled with another ID is refused.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: marshal payload: %w", err)
		}
		nonce := make([]byte, c.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				MetadataKeyID:              []byte(c.keyID),
			},
			Data: c.aead.Seal(nonce, nonce, plain, []byte(c.keyID)),
		}
	}
	return out, nil
}

// Decode decrypts each payload. A payload in clear is refused (ErrPlaintext,
// counted in PlaintextRefused), or passed through unchanged by a Lenient
// codec.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != Encoding {
			if !c.lenient {
				refused.Add(1)
				return nil, &ErrPlaintext{Encoding: enc}
			}
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.decrypt[id]
		if !ok {
			return nil, fmt.Errorf("codec: the payload was encrypted with key %q, this process holds key(s) %s; point temporal.codec_key_file at the key file the workers use (after a rotation, keep the older key listed in it)", id, c.heldIDs())
		}
		ns := aead.NonceSize()
		if len(p.Data) < ns+aead.Overhead() {
			return nil, fmt.Errorf("codec: encrypted payload of %d bytes is too short", len(p.Data))
		}
		plain, err := aead.Open(nil, p.Data[:ns], p.Data[ns:], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("codec: the payload does not decrypt with key %q (altered or corrupt): %w", id, err)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return nil, fmt.Errorf("codec: decrypted payload does not decode: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}

// heldIDs lists the IDs of the keys the codec decrypts with, the current
// one first.
func (c *Codec) heldIDs() string {
	ids := []string{fmt.Sprintf("%q", c.keyID)}
	for id := range c.decrypt {
		if id != c.keyID {
			ids = append(ids, fmt.Sprintf("%q", id))
		}
	}
	sort.Strings(ids[1:])
	return strings.Join(ids, ", ")
}

// DataConverter is the SDK's default converter with payloads through c.
func DataConverter(c *Codec) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FailureConverter also encrypts failures' messages and stack traces,
// which can quote the values an activity refused.
func FailureConverter(dc converter.DataConverter) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})
}
