package codec

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func testCodec(t *testing.T, fill byte) *Codec {
	t.Helper()
	c, err := New(bytes.Repeat([]byte{fill}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jsonPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTripHidesThePlaintext(t *testing.T) {
	c := testCodec(t, 1)
	in := jsonPayload(t, map[string]string{"POSTGRES_PASSWORD": "hunter2"})
	enc, err := c.Encode([]*commonpb.Payload{in})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(enc[0].Metadata[converter.MetadataEncoding]); got != Encoding {
		t.Fatalf("encoding %q, want %q", got, Encoding)
	}
	if string(enc[0].Metadata[MetadataKeyID]) != c.KeyID() || len(c.KeyID()) != 16 {
		t.Fatalf("key id %q, codec's %q", enc[0].Metadata[MetadataKeyID], c.KeyID())
	}
	if bytes.Contains(enc[0].Data, []byte("hunter2")) || bytes.Contains(enc[0].Data, []byte("POSTGRES")) {
		t.Fatal("the ciphertext contains the plaintext")
	}
	again, _ := c.Encode([]*commonpb.Payload{in})
	if bytes.Equal(again[0].Data, enc[0].Data) {
		t.Fatal("two encryptions of one payload are equal: the nonce is not fresh")
	}
	dec, err := c.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(dec[0], in) {
		t.Fatalf("decoded %v, want %v", dec[0], in)
	}
}

func TestTamperedCiphertextIsRefused(t *testing.T) {
	c := testCodec(t, 1)
	enc, err := c.Encode([]*commonpb.Payload{jsonPayload(t, "flip n1")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc[0].Data {
		bad := proto.Clone(enc[0]).(*commonpb.Payload)
		bad.Data[i] ^= 0x01
		if _, err := c.Decode([]*commonpb.Payload{bad}); err == nil {
			t.Fatalf("a flipped bit at byte %d of %d decoded", i, len(bad.Data))
		}
	}
	short := proto.Clone(enc[0]).(*commonpb.Payload)
	short.Data = short.Data[:10]
	if _, err := c.Decode([]*commonpb.Payload{short}); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("a truncated payload: %v", err)
	}
	// The key ID is authenticated: relabelled, a payload does not open even
	// with a codec that holds the right key under that label.
	relabel := proto.Clone(enc[0]).(*commonpb.Payload)
	relabel.Metadata[MetadataKeyID] = []byte("0000000000000000")
	if _, err := c.Decode([]*commonpb.Payload{relabel}); err == nil {
		t.Fatal("a relabelled payload decoded")
	}
	other := testCodec(t, 2)
	if _, err := other.Decode(enc); err == nil || !strings.Contains(err.Error(), c.KeyID()) || !strings.Contains(err.Error(), "temporal.codec_key_file") {
		t.Fatalf("another key's codec: %v", err)
	}
}

// TestPlaintextIsRefusedOnceAKeyIsSet: a payload in clear (a forged
// heartbeat, a query answer, a raw payload) is refused with ErrPlaintext
// and counted; only a Lenient codec (the Web UI's, a replay's) passes it
// through unchanged.
func TestPlaintextIsRefusedOnceAKeyIsSet(t *testing.T) {
	c := testCodec(t, 1)
	in := []*commonpb.Payload{jsonPayload(t, map[string]string{"id": "n1-1", "state": "answered"}), jsonPayload(t, nil), {Data: []byte("raw")}}
	for i := range in {
		before := PlaintextRefused()
		_, err := c.Decode(in[i : i+1])
		var pe *ErrPlaintext
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "temporal.codec_key_file") {
			t.Fatalf("payload %d in clear: %v, want ErrPlaintext naming temporal.codec_key_file", i, err)
		}
		if got := PlaintextRefused() - before; got != 1 {
			t.Fatalf("payload %d: counted %d refusals, want 1", i, got)
		}
	}
	// Through the data converter, as the agent reads a heartbeat.
	var v map[string]string
	if err := DataConverter(c).FromPayloads(&commonpb.Payloads{Payloads: in[:1]}, &v); err == nil || v["state"] == "answered" {
		t.Fatalf("the converter decoded a heartbeat in clear: %v, %v", v, err)
	}
	// One encrypted payload beside one in clear: refused whole.
	enc, err := c.Encode(in[:1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decode([]*commonpb.Payload{enc[0], in[0]}); err == nil {
		t.Fatal("a payload in clear beside an encrypted one was taken")
	}
	out, err := c.Lenient().Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if !proto.Equal(in[i], out[i]) {
			t.Fatalf("lenient: payload %d changed: %v", i, out[i])
		}
	}
	if _, err := c.Decode(in[:1]); err == nil {
		t.Fatal("Lenient changed the codec it was made from")
	}
}

func TestNewRefusesAShortKey(t *testing.T) {
	if _, err := New(make([]byte, 16)); err == nil {
		t.Fatal("a 16-byte key was taken")
	}
}

func TestDataConverterRoundTrip(t *testing.T) {
	dc := DataConverter(testCodec(t, 3))
	p, err := dc.ToPayload(map[string]string{"k": "hunter2"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.Data, []byte("hunter2")) {
		t.Fatal("the converter's payload holds the plaintext")
	}
	var back map[string]string
	if err := dc.FromPayload(p, &back); err != nil || back["k"] != "hunter2" {
		t.Fatalf("back %v, %v", back, err)
	}
}

const uiOrigin = "http://127.0.0.1:8233"

func decodeRequest(t *testing.T, c *Codec, payloads ...*commonpb.Payload) *http.Request {
	t.Helper()
	enc, err := c.Encode(payloads)
	if err != nil {
		t.Fatal(err)
	}
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/decode", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Namespace", "default")
	r.Header.Set("Origin", uiOrigin)
	return r
}

func TestServerDecodesWithTheRightKey(t *testing.T) {
	c := testCodec(t, 1)
	h := Handler(c, ServerOptions{Origins: []string{uiOrigin}})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, decodeRequest(t, c, jsonPayload(t, "migrating mail")))
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var out commonpb.Payloads
	if err := protojson.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	if len(out.Payloads) != 1 || string(out.Payloads[0].Data) != `"migrating mail"` {
		t.Fatalf("decoded %v", out.Payloads)
	}
	if w.Header().Get("Access-Control-Allow-Origin") != uiOrigin {
		t.Fatalf("no CORS header for the UI's origin: %v", w.Header())
	}

	// A codec server holding another key refuses, naming both keys.
	w = httptest.NewRecorder()
	Handler(testCodec(t, 9), ServerOptions{Origins: []string{uiOrigin}}).ServeHTTP(w, decodeRequest(t, c, jsonPayload(t, "x")))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), c.KeyID()) {
		t.Fatalf("another key: status %d: %s", w.Code, w.Body)
	}

	// Nothing else is served.
	w = httptest.NewRecorder()
	r := decodeRequest(t, c, jsonPayload(t, "x"))
	r.URL.Path = "/keys"
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNotFound {
		t.Fatalf("/keys: status %d", w.Code)
	}
}

// encodeRequest is the UI's POST /encode of plain payloads (a signal's
// input as typed into its Signal dialog).
func encodeRequest(t *testing.T, payloads ...*commonpb.Payload) *http.Request {
	t.Helper()
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: payloads})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/encode", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Namespace", "default")
	r.Header.Set("Origin", uiOrigin)
	return r
}

// TestServerEncodesForTheWorkers: /encode answers the UI's origin with
// payloads encrypted under the key the workers hold (they decode them to
// the input as typed, the plaintext nowhere in the answer), and refuses
// another origin and a missing Authorization, as /decode does.
func TestServerEncodesForTheWorkers(t *testing.T) {
	c := testCodec(t, 1)
	h := Handler(c, ServerOptions{Origins: []string{uiOrigin}, Authorization: "Bearer s3cret"})
	in := jsonPayload(t, `{"module":"mail","intent":"signed"}`)
	r := encodeRequest(t, in)
	r.Header.Set("Authorization", "Bearer s3cret")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "mail") || w.Header().Get("Access-Control-Allow-Origin") != uiOrigin {
		t.Fatalf("the answer shows the plaintext or lacks CORS: %v %s", w.Header(), w.Body)
	}
	var out commonpb.Payloads
	if err := protojson.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	if len(out.Payloads) != 1 || string(out.Payloads[0].Metadata["encoding"]) != Encoding {
		t.Fatalf("encoded %v", out.Payloads)
	}
	back, err := c.Decode(out.Payloads)
	if err != nil || !proto.Equal(back[0], in) {
		t.Fatalf("the workers' codec decodes %v (%v), want %v", back, err, in)
	}

	for what, mod := range map[string]func(*http.Request){
		"no Authorization": func(r *http.Request) {},
		"another origin": func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer s3cret")
			r.Header.Set("Origin", "http://evil.example")
		},
	} {
		r := encodeRequest(t, in)
		mod(r)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code/100 != 4 || strings.Contains(w.Body.String(), "binary/encrypted") {
			t.Fatalf("%s: status %d: %s", what, w.Code, w.Body)
		}
	}
}

func TestServerRefusesWithoutAuthorization(t *testing.T) {
	c := testCodec(t, 1)
	h := Handler(c, ServerOptions{Origins: []string{uiOrigin}, Authorization: "Bearer s3cret"})
	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret2", "bearer s3cret"} {
		w := httptest.NewRecorder()
		r := decodeRequest(t, c, jsonPayload(t, "x"))
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized || strings.Contains(w.Body.String(), `"x"`) {
			t.Fatalf("Authorization %q: status %d: %s", auth, w.Code, w.Body)
		}
	}
	w := httptest.NewRecorder()
	r := decodeRequest(t, c, jsonPayload(t, "x"))
	r.Header.Set("Authorization", "Bearer s3cret")
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("the configured Authorization: status %d: %s", w.Code, w.Body)
	}
}

func TestServerAnswersPreflightForTheUIOnly(t *testing.T) {
	h := Handler(testCodec(t, 1), ServerOptions{Origins: []string{uiOrigin}, Authorization: "Bearer s3cret"})
	pre := func(origin string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodOptions, "/decode", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", "POST")
		r.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace,authorization")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := pre(uiOrigin)
	if w.Code/100 != 2 || w.Header().Get("Access-Control-Allow-Origin") != uiOrigin ||
		!strings.Contains(w.Header().Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "X-Namespace") ||
		!strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight from the UI: %d %v", w.Code, w.Header())
	}
	w = pre("http://evil.example")
	if w.Code != http.StatusForbidden || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %d %v", w.Code, w.Header())
	}
}

// TestKeysRotate: a codec holding a new key first and the old one after
// encrypts with the new key (its ID in the payload's metadata) and decodes
// what the old key encrypted; a codec without the old key refuses those,
// naming the key they need and the keys it holds.
func TestKeysRotate(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	before, err := New(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := before.Encode([]*commonpb.Payload{jsonPayload(t, "written before the rotation")})
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := New(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Decode(sealed); err != nil || string(got[0].Data) != `"written before the rotation"` {
		t.Fatalf("an older payload after the rotation: %v %v", got, err)
	}
	fresh, err := rotated.Encode([]*commonpb.Payload{jsonPayload(t, "after")})
	if err != nil {
		t.Fatal(err)
	}
	if id := string(fresh[0].Metadata[MetadataKeyID]); id != KeyID(newKey) {
		t.Fatalf("encrypted with key %q, want the new key %q", id, KeyID(newKey))
	}
	if _, err := before.Decode(fresh); err == nil || !strings.Contains(err.Error(), KeyID(newKey)) {
		t.Fatalf("a codec without the new key: %v", err)
	}
	done, err := New(newKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Decode(sealed); err == nil || !strings.Contains(err.Error(), KeyID(oldKey)) || !strings.Contains(err.Error(), "keep the older key listed") {
		t.Fatalf("the old key removed: %v", err)
	}
}
