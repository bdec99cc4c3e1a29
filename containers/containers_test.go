package containers

import (
	"context"
	"errors"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
)

type fakeAPI struct {
	API  // nil: the report uses only ContainerList
	list []container.Summary
	err  error
}

func (f fakeAPI) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return f.list, f.err
}

func TestReport(t *testing.T) {
	e := NewWith(fakeAPI{list: []container.Summary{
		{ID: "b", Names: []string{"/web"}, Image: "web:1", State: "running",
			Ports:  []container.Port{{IP: "0.0.0.0", PrivatePort: 80, PublicPort: 8080, Type: "tcp"}, {PrivatePort: 9000, Type: "tcp"}},
			Mounts: []container.MountPoint{{Type: "volume", Name: "webdata", Source: "/var/lib/docker/volumes/webdata/_data", Destination: "/data"}},
			NetworkSettings: &container.NetworkSettingsSummary{Networks: map[string]*network.EndpointSettings{
				"bridge": {IPAddress: "172.17.0.2", IPPrefixLen: 16, GlobalIPv6Address: "fd00:17::2", GlobalIPv6PrefixLen: 64},
				"macnet": {IPAddress: "10.99.0.5", IPPrefixLen: 24},
			}}},
		{ID: "a", Names: []string{"/db"}, Image: "db:1", State: "exited"},
	}})
	r := e.Report(context.Background())
	if !r.Available || len(r.Containers) != 2 || r.Containers[0].Name != "db" {
		t.Fatalf("report: %+v", r)
	}
	web := r.Containers[1]
	if len(web.Ports) != 1 || web.Ports[0].HostPort != 8080 || web.Mounts[0].Name != "webdata" {
		t.Fatalf("web: %+v", web)
	}
	// Where Docker DNATs its published ports: every network, with the
	// container's addresses there, for the evaluator to map.
	if len(web.Networks) != 2 || web.Networks[0].Network != "bridge" || len(web.Networks[0].Addrs) != 2 ||
		web.Networks[0].Addrs[0] != "172.17.0.2/16" || web.Networks[0].Addrs[1] != "fd00:17::2/64" ||
		web.Networks[1].Network != "macnet" || web.Networks[1].Addrs[0] != "10.99.0.5/24" {
		t.Fatalf("web's networks: %+v", web.Networks)
	}
	if len(r.Containers[0].Networks) != 0 {
		t.Fatalf("db has no network settings, yet: %+v", r.Containers[0].Networks)
	}
}

func TestEngineAbsentIsReportedNotFatal(t *testing.T) {
	r := NewWith(fakeAPI{err: errors.New("dial unix /var/run/docker.sock: connect: no such file")}).Report(context.Background())
	if r.Available || r.Error == "" {
		t.Fatalf("report: %+v", r)
	}
}
