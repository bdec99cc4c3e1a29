// Package netns runs a function inside a network namespace given by path, on
// a locked OS thread, so that /proc/thread-self/net and netlink sockets opened
// there see the node's namespace rather than the worker's.
package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn in the network namespace at path ("" runs it in the caller's).
// The thread is returned to the original namespace afterwards; if that fails
// the thread stays locked and is discarded by the runtime when the goroutine
// ends, so no other goroutine ever runs in the wrong namespace.
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w (check node.netns)", path, err)
	}
	defer target.Close()

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("own network namespace: %w", err)
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: the runtime terminates it with this goroutine.
			errc <- fmt.Errorf("return from network namespace %s: %w", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Dial connects to addr over TCP from the network namespace at path ("" is
// the caller's): the socket is made there, and stays there for its life.
func Dial(ctx context.Context, path string, d *net.Dialer, addr string) (net.Conn, error) {
	var conn net.Conn
	err := Do(path, func() error {
		var err error
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		if conn != nil { // connected, but the thread could not come back
			conn.Close()
		}
		return nil, err
	}
	return conn, nil
}
