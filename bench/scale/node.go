package scale

// This file holds the scale section's simulated node: the real activities
// on the shared in-memory fakes, with real custody and state on tmpfs.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/config"
	"adoption/custody"
	"adoption/internal/fake"
	"adoption/nodestate"
	"adoption/sockets"
)

// memNode is one simulated node. What it reports of its firewall,
// containers and sockets, and what its Flipper, Marks and Cutover do, are
// the shared in-memory fakes (internal/fake), which answer at once; its custody store (custody.Store, with its
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
	found    json.RawMessage
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
func newMemNode(dir, name string, found json.RawMessage) (*memNode, error) {
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
	m := &memNode{name: name, root: root, found: found, contents: map[string][]byte{},
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
		Firewall:      fake.Listed{Found: m.found},
		Marks:         &fake.KeptMarks{},
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
	a.Fleet = "bench"
	return a, nil
}
