package main

// The node's scenarios beyond the control node's: a member whose adoption
// fails and is retried, with a file conflict resolved, a rehearsal, a
// briefing, a migrate queued twice, a host service checked for health, a
// module with only published ports, a flip whose revert goes unanswered
// once and a flip whose commit fails and is retried; and a control node
// carried from before genesis outcomes were recorded, whose flip runs
// genesis first.

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/config"
	"adoption/workflows"
)

func memberPlan(node string) config.Plan {
	return config.Plan{
		Node: node, Role: "member",
		ManagementPorts: []config.Port{{Num: 22, Proto: "tcp"}},
		Witness:         &config.Witness{Disabled: true},
		Foundation:      []config.NamedPort{{Name: config.OverlayPort, Port: config.Port{Num: 4789, Proto: "udp"}}},
		Modules: []config.ModulePlan{
			{Name: "web", Ports: []config.Port{{Num: 8080, Proto: "tcp"}}, Health: &config.Health{TCP: "127.0.0.1:8080"},
				Files: []config.FilePlan{{Path: "/srv/web/app.env", SHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"}}},
			// A container module with a file: its files converge inside
			// its swap (files-at-swap).
			{Name: "proxy", Container: &config.Container{Name: "proxy", Image: "mesh/proxy:1", Ports: map[string]string{"8443/tcp": "443/tcp"}},
				Files: []config.FilePlan{{Path: "/srv/proxy/proxy.conf", SHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"}}},
		},
		ConfirmTimeout: time.Minute,
	}
}

// memberScript is the member's agent.
func memberScript(node string, p config.Plan) *script {
	conflict := temporal.NewNonRetryableApplicationError("/srv/web/app.env: 1 conflicting key(s); nothing was written", activities.ErrFileConflict, nil,
		[]activities.FileConflict{{Path: "/srv/web/app.env", Key: "PORT", Why: "changed on the node and in the mesh"}})
	return &script{node: node, plan: p, confirmOnly: true,
		failFirst: map[string]string{"Adopt": "adopt: the found firewall changed while it was read", "FlipTrip": "confirm: declared port 8080/tcp does not answer",
			"RevertFlip": "revert: the agent is restarting", "CommitFlip": "commit: /etc/nftables.conf is read-only"},
		errFirst:  map[string]error{"CutoverPreflight": conflict},
		slowFirst: map[string]time.Duration{"ConvergeFiles": 3 * time.Second}}
}

func (r *rec) member(plan config.Plan) error {
	node, id := plan.Node, workflows.WorkflowID(plan.Node)
	if _, err := r.c.ExecuteWorkflow(r.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.NodeWorkflow,
		workflows.Input{Plan: plan, Intent: r.sign(authority.ActStart, nil, plan)}); err != nil {
		return err
	}
	if _, err := r.waitNode(node, "adoption failed", func(s workflows.State) bool { return s.Phase == workflows.PhaseFailed }); err != nil {
		return err
	}
	if err := r.update(node, workflows.UpdateRetry, workflows.RequestInput{Intent: r.sign(authority.ActRetry, nil, plan)}); err != nil {
		return err
	}
	if _, err := r.waitNode(node, "adopted and placed", func(s workflows.State) bool {
		return s.Phase == workflows.PhaseAdopted && s.Genesis.State == "done"
	}); err != nil {
		return err
	}
	if err := r.call(node, workflows.UpdateRehearse, workflows.RequestInput{Module: "web"}); err != nil {
		return err
	}
	if err := r.call(node, workflows.UpdateBrief, workflows.RequestInput{}); err != nil {
		return err
	}
	// web's preflight refuses on a conflicting key: decided, then retried.
	if err := r.update(node, workflows.UpdateMigrate, workflows.RequestInput{Module: "web", Intent: r.sign(authority.ActMigrate, map[string]string{"module": "web"}, plan)}); err != nil {
		return err
	}
	if _, err := r.waitNode(node, "web failed on a conflict", func(s workflows.State) bool {
		m := s.Modules[0]
		return m.State == workflows.ModuleFailed && len(m.Conflicts) > 0
	}); err != nil {
		return err
	}
	if err := r.call(node, workflows.UpdateResolve, workflows.ResolveInput{Path: "/srv/web/app.env", Key: "PORT", Take: "node",
		Intent: r.sign(authority.ActResolve, authority.DecisionArgs("/srv/web/app.env", "PORT", "node"), plan)}); err != nil {
		return err
	}
	if err := r.update(node, workflows.UpdateRetry, workflows.RequestInput{Module: "web", Intent: r.sign(authority.ActRetry, map[string]string{"module": "web"}, plan)}); err != nil {
		return err
	}
	// While web converges its files (slowly), a plan with a new module is
	// sent with two migrates of it: the second is refused.
	if _, err := r.waitNode(node, "web migrating", func(s workflows.State) bool { return s.Modules[0].State == workflows.ModuleMigrating }); err != nil {
		return err
	}
	more := plan
	more.Modules = append(append([]config.ModulePlan(nil), plan.Modules...), config.ModulePlan{Name: "extra", Ports: []config.Port{{Num: 9000, Proto: "tcp"}}})
	for range 2 {
		if err := r.c.SignalWorkflow(r.ctx, id, "", workflows.SignalMigrate, workflows.RequestInput{Module: "extra", Plan: &more,
			Intent: r.sign(authority.ActMigrate, map[string]string{"module": "extra"}, more)}); err != nil {
			return err
		}
	}
	if err := r.update(node, workflows.UpdateMigrate, workflows.RequestInput{Module: "proxy", Intent: r.sign(authority.ActMigrate, map[string]string{"module": "proxy"}, more)}); err != nil {
		return err
	}
	if _, err := r.waitNode(node, "every module migrated", func(s workflows.State) bool {
		n := 0
		for _, m := range s.Modules {
			if m.State == workflows.ModuleMigrated {
				n++
			}
		}
		return n == 3 && len(s.Queue) == 0
	}); err != nil {
		return err
	}
	// The first flip is not confirmed; its revert is answered only when
	// asked again.
	if err := r.update(node, workflows.UpdateFlip, workflows.RequestInput{Intent: r.sign(authority.ActFlip, authority.FlipArgs(more), more)}); err != nil {
		return err
	}
	if _, err := r.waitNode(node, "flip reverted", func(s workflows.State) bool {
		return s.Flip != nil && s.Flip.State == workflows.FlipStateReverted
	}); err != nil {
		return err
	}
	// The second is confirmed, its commit fails, and a retry commits it.
	if err := r.update(node, workflows.UpdateFlip, workflows.RequestInput{Intent: r.sign(authority.ActFlip, authority.FlipArgs(more), more)}); err != nil {
		return err
	}
	if _, err := r.waitNode(node, "flip committing", func(s workflows.State) bool {
		return s.Flip != nil && s.Flip.State == workflows.FlipStateCommitting
	}); err != nil {
		return err
	}
	if err := r.update(node, workflows.UpdateRetry, workflows.RequestInput{Intent: r.sign(authority.ActRetry, nil, more)}); err != nil {
		return err
	}
	if err := r.c.GetWorkflow(r.ctx, id, "").Get(r.ctx, nil); err != nil {
		return fmt.Errorf("the member's workflow: %w", err)
	}
	hs, err := r.runs("member", id)
	if err != nil {
		return err
	}
	// The run must continue as new with requests queued (the history
	// threshold is met while web migrates with two more queued).
	for _, h := range hs[1:] {
		var in workflows.Input
		if err := r.dc.FromPayloads(h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput(), &in); err != nil {
			return err
		}
		if in.Resume != nil && len(in.Resume.Queue) > 0 {
			return nil
		}
	}
	return fmt.Errorf("the member's %d run(s) never continued as new with a request queued: the history threshold (suggestContinueAsNew) no longer falls while web migrates", len(hs))
}

// carriedPlan is a control node raising a registry container.
func carriedPlan(node string) config.Plan {
	return config.Plan{
		Node: node, Role: "control",
		ManagementPorts:      []config.Port{{Num: 22, Proto: "tcp"}},
		Witness:              &config.Witness{Disabled: true},
		Foundation:           []config.NamedPort{{Name: "registry", Port: config.Port{Num: 5001, Proto: "tcp"}}},
		FoundationContainers: []config.Container{{Name: "registry", Image: "mesh/registry:2", Ports: map[string]string{"5001/tcp": "5000/tcp"}}},
		ConfirmTimeout:       time.Minute,
	}
}

// carried: a control node adopted before genesis outcomes were recorded
// (its state carried with none). Its flip runs genesis first, which fails
// (a port collision) and so refuses the flip; a retry runs genesis again,
// raising the registry; a preview sends a wider plan, and the next flip,
// whose first transaction finds its preview stale, converges.
func (r *rec) carried(plan config.Plan) error {
	node, id := plan.Node, workflows.WorkflowID(plan.Node)
	resume := &workflows.State{Node: node, Plan: plan, Phase: workflows.PhaseAdopted, FirewallFingerprint: "fp-1"}
	if _, err := r.c.ExecuteWorkflow(r.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.NodeWorkflow,
		workflows.Input{Plan: plan, Resume: resume, Intent: r.sign(authority.ActStart, nil, plan)}); err != nil {
		return err
	}
	if err := r.update(node, workflows.UpdateFlip, workflows.RequestInput{Intent: r.sign(authority.ActFlip, authority.FlipArgs(plan), plan)}); err != nil {
		return err
	}
	if _, err := r.waitNode(node, "genesis failed at the flip", func(s workflows.State) bool {
		return s.Genesis.State == "failed" && s.Phase == workflows.PhaseAdopted && len(s.Queue) == 0
	}); err != nil {
		return err
	}
	if err := r.update(node, workflows.UpdateRetry, workflows.RequestInput{Intent: r.sign(authority.ActRetry, nil, plan)}); err != nil {
		return err
	}
	if _, err := r.waitNode(node, "genesis done", func(s workflows.State) bool { return s.Genesis.State == "done" }); err != nil {
		return err
	}
	// A preview with a plan that differs (one more management port): the
	// plan replaces the workflow's once the node accepted it.
	wider := plan
	wider.ManagementPorts = append(append([]config.Port(nil), plan.ManagementPorts...), config.Port{Num: 2222, Proto: "tcp"})
	if err := r.call(node, workflows.UpdatePreview, workflows.RequestInput{Plan: &wider}); err != nil {
		return err
	}
	if err := r.update(node, workflows.UpdateFlip, workflows.RequestInput{Intent: r.sign(authority.ActFlip, authority.FlipArgs(wider), wider)}); err != nil {
		return err
	}
	if err := r.c.GetWorkflow(r.ctx, id, "").Get(r.ctx, nil); err != nil {
		return fmt.Errorf("the carried control node's workflow: %w", err)
	}
	return r.writeRuns("carried", id)
}

// call sends an Update whose answer is a result (rehearse, brief, resolve)
// and waits for it.
func (r *rec) call(node, name string, in any) error {
	h, err := r.c.UpdateWorkflow(r.ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.WorkflowID(node), UpdateName: name, Args: []any{in}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	var out any
	if err := h.Get(r.ctx, &out); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	return nil
}
