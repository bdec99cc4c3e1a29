package workflows

import (
	"strings"
	"testing"

	"adoption/config"
)

func TestCheckPlan(t *testing.T) {
	good := testPlan()
	if err := config.CheckPlan(good, "n1", "member"); err != nil {
		t.Fatalf("a well-formed plan refused: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(p *config.Plan)
		want string
	}{
		{"other node", func(p *config.Plan) { p.Node = "n2" }, `the plan sent is node "n2"'s, not n1's`},
		{"other role", func(p *config.Plan) { p.Role = "control" }, `gives node n1 the role "control", but it is a member node`},
		{"bad module name", func(p *config.Plan) { p.Modules[0].Name = "Mail!" }, `modules[0].name "Mail!"`},
		{"duplicate module", func(p *config.Plan) { p.Modules[1].Name = "mail" }, `modules[1].name "mail": another module has this name`},
		{"bad port", func(p *config.Plan) { p.Modules[1].Ports[0].Proto = "sctp" }, `modules[1].ports[0] "8080/sctp"`},
		{"path escapes", func(p *config.Plan) { p.Modules[0].Files[0].Path = "/srv/../etc/shadow" }, `modules[0].files[0].path "/srv/../etc/shadow"`},
		{"bad hash", func(p *config.Plan) { p.Modules[0].Files[0].SHA256 = "zz" }, `modules[0].files[0].sha256 "zz"`},
	} {
		p := testPlan()
		p.Modules = append([]config.ModulePlan(nil), p.Modules...)
		p.Modules[0].Files = append([]config.FilePlan(nil), p.Modules[0].Files...)
		p.Modules[1].Ports = append([]config.Port(nil), p.Modules[1].Ports...)
		c.edit(&p)
		err := config.CheckPlan(p, "n1", "member")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: checkPlan = %v, want %q", c.name, err, c.want)
		}
	}
}
