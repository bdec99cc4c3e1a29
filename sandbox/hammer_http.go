package sandbox

// This file holds the hammer for HTTP services (the stand-in service behind
// a published port says nothing until asked, unlike the sandbox's own
// listeners, which greet): each connection asks GET /health (or another
// path, whose answers it counts by body) and closes; one keep-alive
// connection, opened first, is asked again at the end.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// HammerHTTP is Hammer for an HTTP service at addr.
func HammerHTTP(addr string, every, d time.Duration) (HammerResult, error) {
	return HammerHTTPPath(addr, "/health", every, d)
}

// HammerHTTPPath is HammerHTTP asking GET path on each connection; for a
// path other than /health it counts the answers by body (Bodies).
func HammerHTTPPath(addr, path string, every, d time.Duration) (HammerResult, error) {
	var r HammerResult
	if path != "/health" {
		r.Bodies = map[string]int{}
	}
	held, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return r, fmt.Errorf("open the held connection: %w", err)
	}
	defer held.Close()
	br := bufio.NewReader(held)
	if err := HealthCheck(held, br, true, time.Second); err != nil {
		return r, fmt.Errorf("the held connection's first request: %w", err)
	}
	end := time.Now().Add(d)
	var last time.Time
	for time.Now().Before(end) {
		start := time.Now()
		// Up to 3 s for a connection and its answer, as Hammer: a SYN held
		// through a cutover's swap is slow, not failed.
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		switch {
		case err == nil:
			if body, err := Ask(c, bufio.NewReader(c), path, false, 3*time.Second); err != nil {
				r.TimedOut++
			} else {
				r.answered(start, &last)
				if r.Bodies != nil {
					r.Bodies[body]++
				}
			}
			c.Close()
		case errors.Is(err, syscall.ECONNREFUSED):
			r.Refused++
		default:
			r.TimedOut++
		}
		time.Sleep(every)
	}
	r.Held = HealthCheck(held, br, true, time.Second) == nil
	return r, nil
}

// HealthCheck asks GET /health on c and wants 200 within wait.
func HealthCheck(c net.Conn, br *bufio.Reader, keepAlive bool, wait time.Duration) error {
	_, err := Ask(c, br, "/health", keepAlive, wait)
	return err
}

// Ask asks GET path on c and wants 200 within wait; it returns the body.
func Ask(c net.Conn, br *bufio.Reader, path string, keepAlive bool, wait time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(wait))
	conn := "close"
	if keepAlive {
		conn = "keep-alive"
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: hammer\r\nConnection: %s\r\n\r\n", path, conn); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	return string(body), nil
}
