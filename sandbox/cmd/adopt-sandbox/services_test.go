package main

import (
	"strings"
	"testing"
)

func TestParseServices(t *testing.T) {
	got, err := parseServices([]string{"mail:18025:8025/tcp", "metrics:19100:9100/tcp:unrouted", ""}, "img:v1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "mail" || got[0].Host.Num != 18025 || got[0].Container.Num != 8025 || !got[0].Routed ||
		got[1].Routed || got[1].Host.Proto != "tcp" || got[0].Volumes[0] != "mail-data:/named" || got[0].Image != "img:v1" {
		t.Fatalf("parsed %+v", got)
	}
	for _, bad := range []string{"mail", "mail:18025", "mail:18025:8025", "mail:x:8025/tcp", "Mail:1:2/tcp", "mail:1:2/tcp:open", "a/b:1:2/tcp", "m:0:2/tcp"} {
		if _, err := parseServices([]string{bad}, "img"); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: want an error naming it, got %v", bad, err)
		}
	}
}
