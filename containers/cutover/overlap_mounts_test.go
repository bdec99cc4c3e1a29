package cutover

import (
	"errors"
	"strings"
	"testing"

	"adoption/containers/cutoverwire"
)

// TestOverlapMountProblem: an overlap is refused for a volume declared
// exclusive and for a known store's data directory, naming the mount; any
// other mount may be shared.
func TestOverlapMountProblem(t *testing.T) {
	pred := func(ms ...cutoverwire.Mount) *Predecessor { return &Predecessor{Name: "svc", Mounts: ms} }
	for _, tc := range []struct {
		name      string
		pred      *Predecessor
		exclusive []string
		want      string
	}{
		{"shared volume and bind", pred(cutoverwire.Mount{Type: "volume", Name: "static", Destination: "/srv"}, cutoverwire.Mount{Type: "bind", Source: "/etc/svc", Destination: "/etc/svc"}), []string{"other"}, ""},
		{"no predecessor", nil, []string{"static"}, ""},
		{"exclusive volume", pred(cutoverwire.Mount{Type: "volume", Name: "static", Destination: "/srv"}), []string{"static"}, "volume static at /srv, which the module declares exclusive (container.exclusive)"},
		{"bind of a store's data dir", pred(cutoverwire.Mount{Type: "bind", Source: "/srv/pg", Destination: "/var/lib/postgresql/data/"}), nil, "bind mount /srv/pg at /var/lib/postgresql/data/, the data directory of PostgreSQL"},
		{"volume at a store's data dir", pred(cutoverwire.Mount{Type: "volume", Name: "mydb", Destination: "/var/lib/mysql"}), nil, "volume mydb at /var/lib/mysql, the data directory of MySQL/MariaDB"},
		{"tmpfs there", pred(cutoverwire.Mount{Type: "tmpfs", Destination: "/var/lib/mysql"}), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := OverlapMountProblem(tc.pred, tc.exclusive)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrBadSpec) {
				t.Fatalf("want a bad-spec error with %q, got %v", tc.want, err)
			}
		})
	}
}
