// Package containers speaks to the Docker engine behind a small interface:
// what runs on the node, with its mounts and published ports. The cutover
// steps (issue 4) build on it.
package containers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// Info is what the probe records of one container. Environment variables are
// left out on purpose: they often hold secrets and the probe's result is
// stored in the workflow history.
type Info struct {
	Name   string      `json:"name"`
	ID     string      `json:"id"`
	Image  string      `json:"image"`
	State  string      `json:"state"`
	Mounts []Mount     `json:"mounts,omitempty"`
	Ports  []Published `json:"ports,omitempty"`
}

type Mount struct {
	Type        string `json:"type"` // volume or bind
	Name        string `json:"name,omitempty"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

type Published struct {
	HostIP        string `json:"host_ip,omitempty"`
	HostPort      uint16 `json:"host_port"`
	ContainerPort uint16 `json:"container_port"`
	Proto         string `json:"proto"`
}

// Report is the engine's view, or why there is none: a node without Docker
// is still adoptable, so an absent engine is reported, not fatal.
type Report struct {
	Available  bool   `json:"available"`
	Error      string `json:"error,omitempty"`
	Containers []Info `json:"containers"`
}

// api is the part of the Docker client this package uses, so tests can fake it.
type api interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
}

// Engine is the node's Docker engine.
type Engine struct {
	cli api
	err error // why the engine could not be reached at construction
}

// New connects to the engine named by DOCKER_HOST (default: the local socket).
// It never fails: an unreachable engine shows in Report.
func New() *Engine {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return &Engine{err: err}
	}
	return &Engine{cli: cli}
}

// NewWith wraps an existing client (tests).
func NewWith(cli api) *Engine { return &Engine{cli: cli} }

// Report lists every container, running or not.
func (e *Engine) Report(ctx context.Context) Report {
	if e.err != nil {
		return Report{Error: fmt.Sprintf("docker engine unavailable: %v", e.err)}
	}
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return Report{Error: fmt.Sprintf("docker engine unavailable: %v", err)}
	}
	out := Report{Available: true, Containers: make([]Info, 0, len(list))}
	for _, c := range list {
		info := Info{ID: c.ID, Image: c.Image, State: string(c.State)}
		if len(c.Names) > 0 {
			info.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		for _, m := range c.Mounts {
			info.Mounts = append(info.Mounts, Mount{Type: string(m.Type), Name: m.Name, Source: m.Source, Destination: m.Destination})
		}
		for _, p := range c.Ports {
			if p.PublicPort == 0 {
				continue
			}
			info.Ports = append(info.Ports, Published{HostIP: p.IP, HostPort: p.PublicPort, ContainerPort: p.PrivatePort, Proto: p.Type})
		}
		sort.Slice(info.Ports, func(i, j int) bool { return info.Ports[i].HostPort < info.Ports[j].HostPort })
		out.Containers = append(out.Containers, info)
	}
	sort.Slice(out.Containers, func(i, j int) bool { return out.Containers[i].Name < out.Containers[j].Name })
	return out
}
