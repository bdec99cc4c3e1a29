package main

import (
	"bytes"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/connect"
)

// A pending activity's last failure is stored encrypted with the codec
// key; status shows it decrypted, and says which key it holds.
func TestFailureMessageDecrypted(t *testing.T) {
	tc := config.Temporal{Key: bytes.Repeat([]byte{4}, 32), CodecKeyFile: "/k"}
	var opts client.Options
	if err := connect.WithCodec(&opts, tc); err != nil {
		t.Fatal(err)
	}
	f := opts.FailureConverter.ErrorToFailure(temporal.NewNonRetryableApplicationError("refused: port 2375/tcp is not declared", "NotDeclared", nil))
	if f.GetMessage() == "" || strings.Contains(f.GetMessage(), "2375") || f.GetEncodedAttributes() == nil {
		t.Fatalf("the stored failure is not encrypted: %v", f)
	}
	tg := &target{&connect.Target{Codec: tc, Failures: opts.FailureConverter}}
	if got := tg.failureMessage(f); got != "refused: port 2375/tcp is not declared" {
		t.Fatalf("decrypted message %q", got)
	}
	if got := (&target{}).failureMessage(f); got != f.GetMessage() {
		t.Fatalf("without a key: %q", got)
	}
	if !strings.HasPrefix(tg.payloads(), "encrypted (codec key ") || !strings.Contains((&target{&connect.Target{}}).payloads(), "not encrypted") {
		t.Fatalf("payloads: %q / %q", tg.payloads(), (&target{&connect.Target{}}).payloads())
	}
}
