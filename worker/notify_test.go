package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// READY=1 reaches the socket systemd names in NOTIFY_SOCKET; with none set
// nothing is sent and nothing fails.
func TestSdNotify(t *testing.T) {
	t.Setenv(notifySocketEnv, "")
	if err := sdNotify("READY=1"); err != nil {
		t.Fatalf("without a socket: %v", err)
	}
	path := filepath.Join(t.TempDir(), "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv(notifySocketEnv, path)
	if err := sdNotify("READY=1"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _, err := l.ReadFromUnix(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
}

// An abstract socket (NOTIFY_SOCKET=@name, as systemd may set it) is
// reached too, and a socket that is gone is an error naming the variable.
func TestSdNotifyAbstractAndGone(t *testing.T) {
	name := "adoption-notify-test-" + filepath.Base(t.TempDir())
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "@" + name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv(notifySocketEnv, "@"+name)
	if err := sdNotify("STATUS=dialling"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _, err := l.ReadFromUnix(buf)
	if err != nil || string(buf[:n]) != "STATUS=dialling" {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
	t.Setenv(notifySocketEnv, filepath.Join(t.TempDir(), "gone"))
	if err := sdNotify("READY=1"); err == nil || !strings.Contains(err.Error(), notifySocketEnv) {
		t.Fatalf("a socket that is gone: %v", err)
	}
}
