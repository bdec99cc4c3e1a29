package containers

// Where the Docker engine publishes ports: the network namespace of the
// daemon behind the client's unix socket (SO_PEERCRED names its pid). The
// cutover holds a module's ports there during a swap (PortHold), and only
// when that is the node's own namespace: a node sharing the host's engine
// must not have the host's firewall touched.

import (
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// EngineNetns returns /proc/<pid>/ns/net of the daemon listening on host
// (DOCKER_HOST; empty means the default unix socket).
func EngineNetns(host string) (string, error) {
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	path, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		return "", fmt.Errorf("docker host %s is not a unix socket: the engine's namespace is unknown", host)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		return "", err
	}
	defer c.Close()
	rc, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return "", err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return "", err
	}
	if cerr != nil {
		return "", cerr
	}
	return fmt.Sprintf("/proc/%d/ns/net", cred.Pid), nil
}

// SameNetns reports whether two namespace paths ("" for the caller's own)
// are the same namespace.
func SameNetns(a, b string) (bool, error) {
	stat := func(p string) (*syscall.Stat_t, error) {
		if p == "" {
			p = "/proc/self/ns/net"
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		return fi.Sys().(*syscall.Stat_t), nil
	}
	sa, err := stat(a)
	if err != nil {
		return false, err
	}
	sb, err := stat(b)
	if err != nil {
		return false, err
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
