package watchdog

// This file holds the agent's guard of a converged node: once the flip is
// committed, the mesh's table is the node's firewall, and something on the
// node (a stray `ufw enable`, an `nft flush ruleset`, a package's postinst)
// may remove it. The guard puts it back from the committed flip's record,
// with no Temporal, and says so in the log.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// MeshTable puts the mesh's table back when it is missing.
type MeshTable interface {
	Reassert(spec flip.MeshSpec) (bool, error)
}

// GuardOptions are the guard's parts.
type GuardOptions struct {
	Records   Records
	Converged func() (bool, error)
	Table     MeshTable
	Every     time.Duration
	Log       io.Writer
}

// Guard checks every o.Every, until ctx ends, and reasserts the mesh's
// table of a committed flip on a converged node. It returns how many
// times it put the table back (for tests; the log says each one).
func Guard(ctx context.Context, o GuardOptions) int {
	if o.Every <= 0 {
		o.Every = time.Minute
	}
	restored := 0
	for {
		if did, err := GuardOnce(o); err != nil {
			fmt.Fprintf(o.Log, "mesh guard: %v\n", err)
		} else if did {
			restored++
		}
		select {
		case <-ctx.Done():
			return restored
		case <-time.After(o.Every):
		}
	}
}

// GuardOnce is one check: on a converged node whose flip is committed, the
// mesh's table is put back if it is missing.
func GuardOnce(o GuardOptions) (bool, error) {
	conv, err := o.Converged()
	if err != nil || !conv {
		return false, err
	}
	rec, err := o.Records.Flip()
	if err != nil || rec == nil || rec.State != nodestate.FlipCommitted || len(rec.Mesh) == 0 {
		return false, err
	}
	var spec flip.MeshSpec
	if err := json.Unmarshal(rec.Mesh, &spec); err != nil {
		return false, fmt.Errorf("flip %s: mesh ruleset in the record unreadable: %w", rec.ID, err)
	}
	did, err := o.Table.Reassert(spec)
	if err != nil {
		return false, fmt.Errorf("REASSERTING THE MESH'S TABLE FAILED (flip %s): %w", rec.ID, err)
	}
	if did {
		fmt.Fprintf(o.Log, "mesh guard: table inet %s was gone from node %s (removed by something on the node: a ufw enable, an nft flush?); reasserted it from committed flip %s\n", firewall.MeshTable, spec.Node, rec.ID)
	}
	return did, nil
}
