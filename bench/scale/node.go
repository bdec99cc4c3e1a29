package scale

// This file holds the scale section's simulated node: the real activities
// on the shared in-memory fakes, with real custody and state on tmpfs, and
// its marks in memory on the input and the forward path.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/activities/fake"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/marks"
	"adoption/nodestate"
	"adoption/sockets"
)

// memNode is one simulated node. What it reports of its firewall,
// containers and sockets, and what its Flipper, Marks and Cutover do, are
// the shared in-memory fakes (activities/fake), which answer at once; its custody store (custody.Store, with its
// own custody key, so the digests in the history are keyed as a real
// agent's are) and its state directory (nodestate.Dir: the adopted marker,
// the flip record, converged) are the real ones, on files under a tmpfs
// node root: a healthy node's answers under the activities' current
// contracts (drift by keyed digest, the flip record, the commit's boot
// files), not a second implementation of them to keep in step.
type memNode struct {
	name     string
	root     string // node.root: the files, and the boot path the commit checks
	plan     config.Plan
	found    [2]json.RawMessage
	marks    *memMarks
	contents map[string][]byte
	files    *custody.Store
	state    *nodestate.Dir
}

// memFiles are each node's found files under its root: the two declared
// node files, and ufw's boot switch, which the commit turns off.
var memFiles = map[string]string{
	"/etc/hosts":           "127.0.0.1 localhost\n10.0.0.1 control\n",
	"/etc/resolv.conf":     "nameserver 10.0.0.53\nsearch mesh.internal\n",
	activities.BootUfwConf: "# /etc/ufw/ufw.conf\nENABLED=yes\nLOGLEVEL=low\n",
}

// newMemNode lays out the node's root and state directory under dir and
// creates its custody key, as the agent does at start.
func newMemNode(dir, name string, found [2]json.RawMessage) (*memNode, error) {
	root, stateDir := filepath.Join(dir, name, "root"), filepath.Join(dir, name, "state")
	for path, content := range memFiles {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	// nftables.service as Debian installs it, enabled: the commit's boot
	// path check reads it under node.root.
	unit := filepath.Join(root, "lib/systemd/system/nftables.service")
	if err := os.MkdirAll(filepath.Dir(unit), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(unit, []byte("[Service]\nExecStart=/usr/sbin/nft -f /etc/nftables.conf\nExecStop=/usr/sbin/nft flush ruleset\n[Install]\nWantedBy=sysinit.target\n"), 0o644); err != nil {
		return nil, err
	}
	link := filepath.Join(root, "etc/systemd/system/sysinit.target.wants/nftables.service")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return nil, err
	}
	if err := os.Symlink("/lib/systemd/system/nftables.service", link); err != nil {
		return nil, err
	}
	m := &memNode{name: name, root: root, found: found, marks: &memMarks{}, contents: map[string][]byte{},
		files: custody.New(root, stateDir), state: nodestate.New(stateDir)}
	if err := m.files.EnsureKey(); err != nil {
		return nil, err
	}
	m.plan = config.Plan{Node: name, Role: "member", ManagementPorts: config.MustPorts([]string{"22/tcp"}),
		Witness: &config.Witness{Disabled: true}, // simulated nodes have no address to dial
		Control: []string{"predecessor-sync"}, ConfirmTimeout: 2 * time.Minute, ReconcileInterval: time.Minute,
		DriftInterval: 5 * time.Minute, StopTimeout: 10 * time.Second}
	for _, path := range []string{"/etc/hosts", "/etc/resolv.conf"} {
		mesh := memFiles[path] + "# mesh\n"
		sum := sha256.Sum256([]byte(mesh))
		m.contents[hex.EncodeToString(sum[:])] = []byte(mesh)
		m.plan.NodeFiles = append(m.plan.NodeFiles, config.FilePlan{Path: path, SHA256: hex.EncodeToString(sum[:])})
	}
	return m, nil
}

func (m *memNode) activities() *activities.Activities {
	return &activities.Activities{
		Node:          m.name,
		Firewall:      memFirewall{m},
		Marks:         m.marks,
		Engine:        fake.Engine{Containers: fake.Services([]string{"web", "app", "db"}, 0)},
		Cutover:       fake.Cutover{},
		Flipper:       &fake.Flipper{Saved: "# the predecessor's firewall, as it was\n"},
		Sockets:       fake.Sockets{Listening: []sockets.Listener{{Proto: "tcp", Addr: "0.0.0.0", Port: 22, PID: 1, Exe: "sshd"}}},
		Flips:         m.state,
		StartWatchdog: func() error { return nil },
		Files:         m.files,
		State:         m.state,
		Local:         m.authority,
		Root:          m.root,
	}
}

// authority is the simulated node's own file: its plan, naming the bench's
// fleet (authority.fleet), whose workflow may read the plan.
func (m *memNode) authority() (*authority.Authority, error) {
	a, err := authority.Fixed(m.plan, m.contents, 30*time.Minute)()
	if err != nil {
		return nil, err
	}
	a.Fleet = fleetName
	return a, nil
}

// memMarks is a node's marked rules in memory: fake.KeptMarks on the input
// path, and the forward path a published container's port is opened on
// (activities.ForwardMarks), kept alike. Close and Release remove both.
type memMarks struct {
	fake.KeptMarks
	mu  sync.Mutex
	fwd map[marks.Mark]marks.MarkedRule
}

func (m *memMarks) OpenForward(node, owner string, ports []config.Port) (added, present []marks.MarkedRule, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fwd == nil {
		m.fwd = map[marks.Mark]marks.MarkedRule{}
	}
	for _, p := range ports {
		r := marks.MarkedRule{Family: "ip", Table: "filter", Chain: "ufw-user-forward", Mark: marks.Mark{Node: node, Owner: owner, Port: p.Num, Proto: p.Proto}}
		if _, ok := m.fwd[r.Mark]; ok {
			present = append(present, r)
			continue
		}
		m.fwd[r.Mark] = r
		added = append(added, r)
	}
	return added, present, nil
}

// forward removes the forward marks keep says, returning them.
func (m *memMarks) forward(keep func(marks.Mark) bool) []marks.MarkedRule {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []marks.MarkedRule
	for k, r := range m.fwd {
		if !keep(k) {
			out = append(out, r)
			delete(m.fwd, k)
		}
	}
	return out
}

func (m *memMarks) Close(node, owner string) ([]marks.MarkedRule, error) {
	out, err := m.KeptMarks.Close(node, owner)
	return append(out, m.forward(func(k marks.Mark) bool { return k.Owner != owner })...), err
}

func (m *memMarks) Release(node string) ([]marks.MarkedRule, error) {
	out, err := m.KeptMarks.Release(node)
	return append(out, m.forward(func(marks.Mark) bool { return false })...), err
}

func (m *memMarks) List(node string) ([]marks.MarkedRule, error) {
	out, err := m.KeptMarks.List(node)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.fwd {
		out = append(out, r)
	}
	return out, err
}

// memFirewall is the node's firewall as listed: the found ruleset, and
// once the node's marks hold a rule on the input path (its module's port
// opened) the same with that port allowed, as a listing would show it.
type memFirewall struct{ m *memNode }

func (f memFirewall) listed() fake.Listed {
	if in, _ := f.m.marks.KeptMarks.List(f.m.name); len(in) > 0 {
		return fake.Listed{Found: f.m.found[1]}
	}
	return fake.Listed{Found: f.m.found[0]}
}

func (f memFirewall) Ruleset() (*firewall.Ruleset, error) { return f.listed().Ruleset() }
func (f memFirewall) Inspect(ctx context.Context) (eval.Report, error) {
	return f.listed().Inspect(ctx)
}
