package main

// The fleet in waves: a control node, then waves of 1 and 2 members, each
// wave started once the one before migrated; one `adopt fleet migrate web`
// that follows the waves, sent through the orchestrator's relay, paused
// while under way and resumed, and
// `adopt fleet flip` with one node's preview refusing within its wave's
// budget. The fleet's and its nodes' histories are written.

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

var waveNodes = []string{"rwa", "rwb", "rwc", "rwd"}

// wavePlans are the waves fleet's plans: every node declares web.
func wavePlans() []config.Plan {
	var out []config.Plan
	for i, n := range waveNodes {
		p := config.Plan{Node: n, Role: "member", ManagementPorts: []config.Port{{Num: 22, Proto: "tcp"}}, Witness: &config.Witness{Disabled: true},
			Modules:        []config.ModulePlan{{Name: "web", Ports: []config.Port{{Num: 80, Proto: "tcp"}}}},
			ConfirmTimeout: time.Minute}
		if i == 0 {
			p.Role = "control"
		}
		out = append(out, p)
	}
	return out
}

func (r *rec) fleetUpdate(name, update string, in fleet.FleetRequest) error {
	h, err := r.c.UpdateWorkflow(r.ctx, client.UpdateWorkflowOptions{
		WorkflowID: fleet.FleetID(name), UpdateName: update, Args: []any{in}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("fleet update %s: %w", update, err)
	}
	var a fleet.FleetAnswer
	if err := h.Get(r.ctx, &a); err != nil {
		return fmt.Errorf("fleet update %s: %w", update, err)
	}
	return nil
}

// fleetOp sends a fleet migrate or flip and waits until it is done.
func (r *rec) fleetOp(name, update string, in fleet.FleetRequest) error {
	if err := r.fleetUpdate(name, update, in); err != nil {
		return err
	}
	return r.waitFleetNamed(name, update+" done", func(st fleet.FleetState) bool {
		return st.Op != nil && (st.Op.Done || st.Op.Halted != "")
	})
}

func (r *rec) waves(plans []config.Plan) error {
	const name = "rwaves"
	fid := fleet.FleetID(name)
	members := []fleet.FleetMember{{Node: waveNodes[0], Role: "control"}}
	for _, n := range waveNodes[1:] {
		members = append(members, fleet.FleetMember{Node: n, Role: "member"})
	}
	if _, err := r.c.ExecuteWorkflow(r.ctx, client.StartWorkflowOptions{ID: fid, TaskQueue: workflows.TaskQueue}, fleet.FleetWorkflow,
		fleet.FleetInput{Name: name, Members: members, Intent: r.sign(authority.ActFleet, nil, plans...),
			Waves: &config.Waves{Sizes: []int{1, 2}, Budgets: []int{0, 1}}}); err != nil {
		return err
	}
	// One migrate for every node, those not started yet too: it follows
	// the waves (fleet-ops-follow), each wave's requests relayed in
	// batches (fleet-relay-batches). Paused while it is under way, the
	// next wave waits; resumed, it goes on.
	if _, err := r.waitNode("rwa", "rwa adopted", func(s workflows.State) bool { return s.Phase == workflows.PhaseAdopted }); err != nil {
		return err
	}
	if err := r.fleetUpdate(name, fleet.UpdateFleetMigrate, fleet.FleetRequest{Module: "web", Nodes: waveNodes,
		Intent: r.sign(authority.ActFleetMigrate, map[string]string{"module": "web"}, plans...)}); err != nil {
		return err
	}
	if err := r.fleetUpdate(name, fleet.UpdateFleetPause, fleet.FleetRequest{}); err != nil {
		return err
	}
	if _, err := r.waitNode("rwa", "rwa migrated", func(s workflows.State) bool {
		return len(s.Modules) > 0 && s.Modules[0].State == workflows.ModuleMigrated
	}); err != nil {
		return err
	}
	if err := r.fleetUpdate(name, fleet.UpdateFleetResume, fleet.FleetRequest{Intent: r.sign(authority.ActFleetResume, nil, plans...)}); err != nil {
		return err
	}
	if err := r.waitFleetNamed(name, "the migrate done", func(st fleet.FleetState) bool {
		return st.Op != nil && (st.Op.Done || st.Op.Halted != "")
	}); err != nil {
		return err
	}
	if err := r.waitFleetNamed(name, "every node migrated", func(st fleet.FleetState) bool {
		for _, n := range st.Nodes {
			if !n.Done {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	// rwc's preview refuses: within wave 1's budget of one.
	if err := r.fleetOp(name, fleet.UpdateFleetFlip, fleet.FleetRequest{Intent: r.sign(authority.ActFleetFlip, nil, plans...)}); err != nil {
		return err
	}
	if err := r.update("rwc", workflows.UpdateRelease, workflows.RequestInput{Intent: r.sign(authority.ActRelease, nil, plans[2])}); err != nil {
		return err
	}
	var st fleet.FleetState
	if err := r.c.GetWorkflow(r.ctx, fid, "").Get(r.ctx, &st); err != nil {
		return fmt.Errorf("the waves fleet: %w", err)
	}
	if !strings.Contains(strings.Join(st.Events, "\n"), "rwc") {
		return fmt.Errorf("the waves fleet never named rwc's refusal: %v", st.Events)
	}
	if err := r.writeRuns("waves", fid); err != nil {
		return err
	}
	for _, n := range waveNodes {
		if err := r.writeRuns("waves-"+n, workflows.WorkflowID(n)); err != nil {
			return err
		}
	}
	return nil
}
