package config

import (
	"strings"
	"testing"
)

func TestDockerHost(t *testing.T) {
	base := "node: {name: n1}\n"
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"", true},
		{"unix:///run/adopt-sb/n1/docker.sock", true},
		{"tcp://10.0.0.5:2375", true},
		{"tcp://[fd00::5]:2376", true},
		{"unix://run/docker.sock", false},         // relative: the host part swallows "run"
		{"unix:///run/../etc/docker.sock", false}, // not clean
		{"tcp://10.0.0.5", false},                 // no port
		{"ssh://root@node", false},
		{"/run/docker.sock", false},
		{"http://[::1", false},
	} {
		t.Run(tc.host, func(t *testing.T) {
			_, err := Load(write(t, base+"docker: {host: \""+tc.host+"\"}\n"))
			if tc.ok && err != nil {
				t.Fatalf("%q refused: %v", tc.host, err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatalf("%q accepted", tc.host)
				}
				if !strings.Contains(err.Error(), "docker.host") || !strings.Contains(err.Error(), tc.host) {
					t.Fatalf("error does not name the key and the value: %v", err)
				}
			}
		})
	}
}

func TestDockerHostPrecedence(t *testing.T) {
	path := write(t, "node: {name: n1}\ndocker: {host: \"unix:///run/file.sock\"}\n")
	t.Setenv("DOCKER_HOST", "unix:///run/env.sock")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Docker.EngineHost(); got != "unix:///run/file.sock" {
		t.Fatalf("docker.host must win over DOCKER_HOST: got %q", got)
	}
	t.Setenv("ADOPT_DOCKER_HOST", "unix:///run/adopt.sock")
	if c, err = Load(path); err != nil {
		t.Fatal(err)
	}
	if got := c.Docker.EngineHost(); got != "unix:///run/adopt.sock" {
		t.Fatalf("ADOPT_DOCKER_HOST must override the file: got %q", got)
	}
	t.Setenv("ADOPT_DOCKER_HOST", "")
	c, err = Load(write(t, "node: {name: n1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Docker.EngineHost(); got != "unix:///run/env.sock" {
		t.Fatalf("without docker.host, DOCKER_HOST is the engine: got %q", got)
	}
}
