package workflows

// This file measures what a node's whole life puts into its history as
// activity inputs (adopt, a module's cutover, a day of watches, the release),
// and checks that none of those inputs carries the plan: the node's agent
// reads its plan from its own file, so a request names it by hash only.

import (
	"context"
	"reflect"
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"adoption/activities"
	"adoption/activities/watch"
	"adoption/config"
	"adoption/internal/testenv"
)

// countingConverter is the default data converter, counting the bytes of
// the payloads it writes: all of them, and those of activity inputs
// (whose JSON it keeps).
type countingConverter struct {
	converter.DataConverter
	total, inputs int
	inputJSON     []string
}

func (c *countingConverter) count(v any, p *commonpb.Payload) {
	n := p.Size()
	c.total += n
	t := reflect.TypeOf(v)
	if t != nil && strings.HasPrefix(t.PkgPath(), "adoption/activities") && strings.HasSuffix(t.Name(), "Input") {
		c.inputs += n
		c.inputJSON = append(c.inputJSON, string(p.GetData()))
	}
}

func (c *countingConverter) ToPayload(v any) (*commonpb.Payload, error) {
	p, err := c.DataConverter.ToPayload(v)
	if err == nil {
		c.count(v, p)
	}
	return p, err
}

func (c *countingConverter) ToPayloads(vs ...any) (*commonpb.Payloads, error) {
	ps, err := c.DataConverter.ToPayloads(vs...)
	if err == nil {
		for i, p := range ps.GetPayloads() {
			c.count(vs[i], p)
		}
	}
	return ps, err
}

// A control node's life, from config/node.example.yaml: adopted, its module
// migrated, a day of watches, released. Its activity
// inputs name the plan by its hash; none carries the plan itself.
func (s *NodeSuite) TestActivityInputsCarryThePlansHashOnly() {
	cfg, err := config.Load(testenv.NodeExample(s.T(), config.OperatorPlaceholder))
	s.Require().NoError(err)
	plan := cfg.Plan()
	cc := &countingConverter{DataConverter: converter.GetDefaultDataConverter()}
	s.env.SetDataConverter(cc)

	s.expectAdoption(time.Second)
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Return(&activities.CheckPortsResult{}, nil).Maybe()
	s.env.OnActivity(a.RaiseFoundation, mock.Anything, mock.Anything).Return(&activities.FoundationResult{}, nil).Maybe()
	mockCutover(s.env, &s.calls, "")
	s.env.RegisterActivity(&watch.Watcher{})
	s.env.OnActivity(watcher.Watch, mock.Anything, mock.Anything).After(watchBound).Return(func(_ context.Context, in watch.Input) (*watch.Result, error) {
		return &watch.Result{Digest: in.Known, Checked: true, Bound: true, Present: 2}, nil
	}).Maybe()
	s.expectRelease()
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(SignalMigrate, RequestInput{Module: "mail"}) }, time.Minute)
	s.signal(24*time.Hour, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: plan})
	st := s.result()
	s.Equal(PhaseReleased, st.Phase)

	s.T().Logf("node %s, plan %d bytes canonical: %d activity inputs, %d bytes; all payloads %d bytes",
		plan.Node, len(plan.Canonical()), len(cc.inputJSON), cc.inputs, cc.total)
	s.Require().NotEmpty(cc.inputJSON, "no activity input was counted: the measure says nothing")
	for _, in := range cc.inputJSON {
		s.NotContains(in, `"modules"`, "an activity input carries the plan")
		s.NotContains(in, plan.Modules[0].Container.Image, "an activity input carries the plan")
		s.Contains(in, plan.Hash(), "an activity input does not name the plan by its hash")
	}
}
