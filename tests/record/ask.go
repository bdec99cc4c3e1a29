package main

// A fleet that asks: two nodes adopted with nothing to migrate, started
// before the fleet continued as new (so it cannot see them end), quiet for
// longer than the fleet's first ask (shortened from an hour): it holds ask
// rounds through the orchestrator's relay; then both are released.

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

var askNodes = []string{"rqa", "rqb"}

func askPlans() []config.Plan {
	var out []config.Plan
	for i, n := range askNodes {
		p := config.Plan{Node: n, Role: "member", ManagementPorts: []config.Port{{Num: 22, Proto: "tcp"}}, Witness: &config.Witness{Disabled: true}, ConfirmTimeout: time.Minute}
		if i == 0 {
			p.Role = "control"
		}
		out = append(out, p)
	}
	return out
}

func (r *rec) ask(plans []config.Plan) error {
	const name = "rask"
	fid := fleet.FleetID(name)
	members := []fleet.FleetMember{{Node: askNodes[0], Role: "control"}, {Node: askNodes[1], Role: "member"}}
	if _, err := r.c.ExecuteWorkflow(r.ctx, client.StartWorkflowOptions{ID: fid, TaskQueue: workflows.TaskQueue}, fleet.FleetWorkflow,
		fleet.FleetInput{Name: name, Members: members, Intent: r.sign(authority.ActFleet, nil, plans...), AskFirst: 2 * time.Second, HistoryLimit: 40}); err != nil {
		return err
	}
	if err := r.waitFleetNamed(name, "an ask round", func(st fleet.FleetState) bool {
		for _, n := range st.Nodes {
			if !n.Done {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	if err := r.waitFleetNamed(name, "a continue-as-new", func(st fleet.FleetState) bool { return st.Runs > 0 }); err != nil {
		return err
	}
	// Quiet nodes from an earlier run: ask rounds within a few seconds.
	time.Sleep(8 * time.Second)
	for _, p := range plans {
		if err := r.update(p.Node, workflows.UpdateRelease, workflows.RequestInput{Intent: r.sign(authority.ActRelease, nil, p)}); err != nil {
			return err
		}
	}
	var st fleet.FleetState
	if err := r.c.GetWorkflow(r.ctx, fid, "").Get(r.ctx, &st); err != nil {
		return fmt.Errorf("the asking fleet: %w", err)
	}
	if !strings.Contains(strings.Join(st.Events, "\n"), "every node has ended") {
		return fmt.Errorf("the asking fleet ended without its nodes: %v", st.Events)
	}
	return r.writeRuns("ask", fid)
}
