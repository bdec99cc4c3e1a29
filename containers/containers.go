// Package containers speaks to the Docker engine behind a small interface:
// what runs on the node, with its mounts and published ports. The cutover
// (containers/cutover) builds on it.
package containers

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"adoption/containers/cutoverwire"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Info is cutoverwire.Info.
type Info = cutoverwire.Info

// Attachment is cutoverwire.Attachment.
type Attachment = cutoverwire.Attachment

// Mount is cutoverwire.Mount.
type Mount = cutoverwire.Mount

// Published is cutoverwire.Published.
type Published = cutoverwire.Published

// Report is cutoverwire.Report.
type Report = cutoverwire.Report

// API is the part of the Docker client this package and the cutover use,
// so tests can fake it. Every method has the signature of *client.Client's.
type API interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerStop(ctx context.Context, containerID string, options container.StopOptions) error
	ContainerRename(ctx context.Context, containerID, newContainerName string) error
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	ContainerUpdate(ctx context.Context, containerID string, updateConfig container.UpdateConfig) (container.UpdateResponse, error)
	ContainerLogs(ctx context.Context, containerID string, options container.LogsOptions) (io.ReadCloser, error)
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (image.InspectResponse, error)
	NetworkConnect(ctx context.Context, networkID, containerID string, config *network.EndpointSettings) error
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
}

// Engine is the node's Docker engine.
type Engine struct {
	cli  API
	err  error  // why the engine could not be reached at construction
	host string // the engine's address, named when it cannot be reached
}

// New connects to the engine named by DOCKER_HOST (default: the local socket).
// It never fails: an unreachable engine shows in Report.
func New() *Engine { return NewAt("") }

// NewAt connects to the engine at host (unix:///PATH or tcp://HOST:PORT,
// the node's docker.host); empty means New's DOCKER_HOST or the local
// socket. It never fails: an unreachable engine shows in Report, named.
func NewAt(host string) *Engine {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return &Engine{err: err, host: host}
	}
	return &Engine{cli: cli, host: cli.DaemonHost()}
}

// NewWith wraps an existing client (tests).
func NewWith(cli API) *Engine { return &Engine{cli: cli} }

// Client is the engine's client; nil when Err is not.
func (e *Engine) Client() API { return e.cli }

// Err is why the engine could not be reached at construction; nil when a
// client was made (which says nothing yet of the engine answering).
func (e *Engine) Err() error { return e.err }

// Report lists every container, running or not.
func (e *Engine) Report(ctx context.Context) Report {
	if e.err != nil {
		return Report{Error: e.unreachable(e.err)}
	}
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return Report{Error: e.unreachable(err)}
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
		info.Networks = attachments(c.NetworkSettings)
		out.Containers = append(out.Containers, info)
	}
	sort.Slice(out.Containers, func(i, j int) bool { return out.Containers[i].Name < out.Containers[j].Name })
	return out
}

// unreachable names the engine that could not be reached and what to do:
// the probe must never read it as "no containers".
func (e *Engine) unreachable(err error) string {
	host := e.host
	if host == "" {
		host = "the default engine"
	}
	return fmt.Sprintf("docker engine unavailable at %s: %v; containers and published ports are UNKNOWN: start the engine or set docker.host (or DOCKER_HOST)", host, err)
}

// attachments lists a container's networks and its addresses on each, by
// network name.
func attachments(ns *container.NetworkSettingsSummary) []Attachment {
	if ns == nil {
		return nil
	}
	var out []Attachment
	for name, ep := range ns.Networks {
		a := Attachment{Network: name}
		if ep != nil {
			if ep.IPAddress != "" {
				a.Addrs = append(a.Addrs, fmt.Sprintf("%s/%d", ep.IPAddress, ep.IPPrefixLen))
			}
			if ep.GlobalIPv6Address != "" {
				a.Addrs = append(a.Addrs, fmt.Sprintf("%s/%d", ep.GlobalIPv6Address, ep.GlobalIPv6PrefixLen))
			}
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Network < out[j].Network })
	return out
}
