package relay

import (
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

// standing tells the chain the fleet started (same first run, the fleet as
// parent) from a workflow started again outside it.
func TestStanding(t *testing.T) {
	c := Child{Node: "m1", RunID: "r1"}
	for _, tc := range []struct {
		what                  string
		first, parent, latest string
		status                enumspb.WorkflowExecutionStatus
		want                  string
	}{
		{"running, continued as new", "r1", "fleet/prod", "r5", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, ""},
		{"terminated", "r1", "fleet/prod", "r5", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, "terminated"},
		{"restarted outside", "r9", "", "r9", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "replaced outside the fleet: the workflow node-migration/m1 under its ID now (run r9, running)"},
		{"another fleet's", "r9", "fleet/other", "r9", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "replaced outside the fleet"},
	} {
		got := standing("fleet/prod", c, tc.first, tc.parent, tc.latest, tc.status)
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.what, got, tc.want)
		}
	}
}
