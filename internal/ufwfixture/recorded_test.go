package ufwfixture

// The fixtures read from testdata/ are byte for byte what they were as Go
// string literals: each output's SHA-256 as the literals made it.

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func TestFixturesAsRecorded(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"Save4", Save4, "21c7d3c0f4a35908b60e4ad9ecbd2dd153da9f255e543bc6ed38fb4b44a98da6"},
		{"Save6", Save6, "6cc3ce63bb0e143d3730d2c6b96b1c0ab0807d60ba930901e673c364fa546e43"},
		{"Fixed6", Fixed6, "541072c901e89371cd3f26a540d20c2efd159233da296b7b4b02ca82392422bd"},
		{"Fixed4()", Fixed4(), "c6dcd54fd70d82745c45858593f2ee437ab5130e8885186ad0d41199998bc1d8"},
		{"DefaultDeny(nil)", DefaultDeny(nil), "9cb74d9c99fe01e1df1774e19eb4c444e8fce8cdf7f5fbe5edf38d4c409a2ebb"},
		{"Control4(300, 40)", Control4(300, 40), "8a50f853c7a3c8e0f1aa6b5793e9c0ceee085e05315388ec9bb714b78f1f74a3"},
		{"Control6(300)", Control6(300), "1fd8d3ecb7a0db3c2d56403c6eb3774431a497ccb9ba2911e91c556c861a5747"},
	} {
		sum := sha256.Sum256([]byte(c.got))
		if got := hex.EncodeToString(sum[:]); got != c.want {
			t.Errorf("%s: sha256 %s, want %s (as the Go literals made it)", c.name, got, c.want)
		}
	}
}
