package containers

import (
	"context"
	"errors"
	"testing"

	"github.com/docker/docker/api/types/container"
)

type fakeAPI struct {
	api  // nil: the report uses only ContainerList
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
			Mounts: []container.MountPoint{{Type: "volume", Name: "webdata", Source: "/var/lib/docker/volumes/webdata/_data", Destination: "/data"}}},
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
}

func TestEngineAbsentIsReportedNotFatal(t *testing.T) {
	r := NewWith(fakeAPI{err: errors.New("dial unix /var/run/docker.sock: connect: no such file")}).Report(context.Background())
	if r.Available || r.Error == "" {
		t.Fatalf("report: %+v", r)
	}
}
