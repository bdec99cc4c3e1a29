package workflows

import (
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"adoption/activities"
	"adoption/config"
	"adoption/firewall/flip"
	"adoption/intent"
	"adoption/keyfile"
)

// A flip refused by the node's preview on a node file's conflicting key
// keeps the conflict (path and key) in the last preview; `resolve` takes
// it, refuses a key the preview did not name, and the next flip carries
// the signed decision to the node.
func (s *NodeSuite) TestNodeFileConflictResolvedThenFlipped() {
	const path = "/etc/ssh/sshd_config.d/10-mesh.conf"
	p := flipPlan()
	p.Modules = nil
	p.NodeFiles = []config.FilePlan{{Path: path, SHA256: "ab", Keep: []string{"Port"}, Format: "spaced"}}
	s.expectAdoption(time.Second)
	decided := &intent.Signed{Payload: []byte("resolve"), Signature: []byte("sig")}
	var sent [][]activities.FileDecision
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		sent = append(sent, args[1].(activities.FlipTripInput).Decisions)
	}).Return(&activities.FlipResult{ID: "n1-1", State: activities.FlipPreviewRefused, Preview: &flip.Preview{
		Reasons: []string{"node file " + path + " key passwordauthentication: changed on the node"},
		NodeFiles: []keyfile.FileMerge{{Path: path, Format: "spaced", Kept: []string{"port"},
			Conflicts: []keyfile.FileConflict{{Path: path, Key: "passwordauthentication", Why: "changed on the node"}}}}}}, nil).Once()
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		sent = append(sent, args[1].(activities.FlipTripInput).Decisions)
	}).Return(&activities.FlipResult{ID: "n1-1", State: FlipStateCommitted, Preview: &flip.Preview{Approved: true, FoundFingerprint: "f1"}}, nil).Once()

	var refused State
	var notNamed, none error
	var res ResolveResult
	s.signal(time.Minute, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() { refused = s.query() }, 2*time.Minute)
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateResolve, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { notNamed = err }, OnAccept: func() {}, OnComplete: func(any, error) { s.Fail("port is kept, not in conflict") },
		}, ResolveInput{Path: path, Key: "port", Take: "mesh"})
		s.env.UpdateWorkflow(UpdateResolve, "u2", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { none = err }, OnAccept: func() {},
			OnComplete: func(v any, err error) { s.NoError(err); res = v.(ResolveResult) },
		}, ResolveInput{Path: path, Key: "passwordauthentication", Take: "node", Intent: decided})
	}, 3*time.Minute)
	s.signal(4*time.Minute, SignalFlip, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: p})
	st := s.result()

	s.Equal(PhaseAdopted, refused.Phase)
	s.Contains(refused.LastError, path+" key passwordauthentication")
	s.Require().Error(notNamed)
	s.Contains(notNamed.Error(), "has no conflict")
	s.NoError(none)
	s.Equal(0, res.Remaining)
	s.Contains(res.Next, "adopt flip n1")
	s.Require().Len(sent, 2)
	s.Empty(sent[0])
	s.Equal([]activities.FileDecision{{Path: path, Key: "passwordauthentication", Take: "node", Intent: decided}}, sent[1])
	s.Equal(PhaseConverged, st.Phase)
}
