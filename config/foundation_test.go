package config

import "testing"

// foundation.containers reach the plan with their environment as digests
// only, and the values stay in Contents, on the node.
func TestPlanCarriesFoundationContainers(t *testing.T) {
	c := &Config{Node: Node{Name: "c1", Role: "control"}, Foundation: Foundation{
		Ports:      map[string]string{"registry": "5001/tcp"},
		Containers: []Container{{Name: "registry", Image: "mesh/registry:1", Ports: map[string]string{"5001/tcp": "5000/tcp"}, Env: []string{"SECRET=s3cret"}}},
	}}
	p := c.Plan()
	if len(p.FoundationContainers) != 1 || p.FoundationContainers[0].Name != "registry" || p.FoundationContainers[0].Env != nil {
		t.Fatalf("plan's foundation containers %+v: want registry with no env values", p.FoundationContainers)
	}
	sum := p.FoundationContainers[0].EnvSHA256["SECRET"]
	if sum == "" || string(c.Contents()[sum]) != "s3cret" {
		t.Fatalf("SECRET's digest %q does not find its value in Contents", sum)
	}
	if p.Hash() == (Plan{Node: "c1", Role: "control", Foundation: p.Foundation}).Hash() {
		t.Fatal("a plan's foundation containers do not change its canonical form")
	}
}
