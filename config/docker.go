package config

// This file holds the docker.host key: which Docker engine the node agent
// speaks to. A node whose engine is not the host's default (its own engine
// in a network namespace, a rootless engine, a remote one over TCP) names it
// here; empty falls back to DOCKER_HOST, then to the local socket, as the
// docker CLI does.

import (
	"net"
	"net/url"
	"os"
	"path"
)

// Docker says how to reach the node's engine.
type Docker struct {
	// Host is unix:///ABSOLUTE/PATH or tcp://HOST:PORT. Empty: DOCKER_HOST,
	// else the engine's default socket.
	Host string `mapstructure:"host" json:"host,omitempty"`
}

// EngineHost is the engine the agent dials: docker.host (ADOPT_DOCKER_HOST
// overrides the file), else DOCKER_HOST, else "" for the client's default.
func (d Docker) EngineHost() string {
	if d.Host != "" {
		return d.Host
	}
	return os.Getenv("DOCKER_HOST")
}

func (v *validator) docker(d Docker) {
	if d.Host == "" {
		return
	}
	const want = "unix:///ABSOLUTE/PATH/docker.sock or tcp://HOST:PORT (or empty for DOCKER_HOST, else the local engine)"
	u, err := url.Parse(d.Host)
	if err != nil {
		v.add("docker.host", d.Host, want)
		return
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || !path.IsAbs(u.Path) || path.Clean(u.Path) != u.Path || u.RawQuery != "" {
			v.add("docker.host", d.Host, "a unix socket needs three slashes and a clean absolute path: "+want)
		}
	case "tcp":
		if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" || (u.Path != "" && u.Path != "/") {
			v.add("docker.host", d.Host, "a TCP engine needs HOST:PORT: "+want)
		}
	default:
		v.add("docker.host", d.Host, want)
	}
}
