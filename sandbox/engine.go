package sandbox

// This file holds a node's own Docker engine (the reference node's and the
// engine node's): a dockerd run in the node's network namespace (nsenter --net: `ip netns exec` remounts
// /sys and hides the cgroup mounts dockerd needs), with its own data root,
// exec root, socket and pid file, so it manages the node's iptables-nft
// rules (DOCKER, DOCKER-USER, DNAT) as a predecessor's engine does. Images move
// in from the host's engine with docker save | docker load: no registry.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dockerd is one node's engine: where it keeps its state and how it is
// reached.
type dockerd struct {
	netns    string   // the namespace's name, under /run/netns
	dataRoot string   // images, containers, volumes
	runDir   string   // exec root, socket, pid file, config file
	logPath  string   // its output
	extra    []string // further dockerd flags
}

func (d dockerd) host() string       { return "unix://" + filepath.Join(d.runDir, "docker.sock") }
func (d dockerd) pidFile() string    { return filepath.Join(d.runDir, "docker.pid") }
func (d dockerd) execRoot() string   { return filepath.Join(d.runDir, "exec") }
func (d dockerd) configFile() string { return filepath.Join(d.runDir, "daemon.json") }

// engine is the reference node's dockerd.
func (n *RefNode) engine() dockerd {
	return dockerd{netns: n.Netns, dataRoot: filepath.Join(n.Dir, "engine"), runDir: n.RunDir, logPath: filepath.Join(n.Dir, "dockerd.log")}
}

// hostDriver is the host engine's storage driver: the one that works on
// this machine's filesystem (fuse-overlayfs here).
func hostDriver() (string, error) {
	out, err := exec.Command("docker", "info", "--format", "{{.Driver}}").Output()
	if err != nil {
		return "", fmt.Errorf("the host's Docker engine (its storage driver is the node engine's): docker info: %w", err)
	}
	d := strings.TrimSpace(string(out))
	if d == "" {
		return "", fmt.Errorf("docker info reports no storage driver")
	}
	return d, nil
}

// start runs dockerd in the node's namespace and waits until it answers.
// The host's /etc/docker/daemon.json sets data-root, which the flag would
// conflict with: an empty config file of its own avoids both.
func (d dockerd) start() error {
	driver, err := hostDriver()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.runDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(d.configFile(), []byte("{}\n"), 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll(d.dataRoot, 0o711); err != nil {
		return err
	}
	args := []string{"--net=/run/netns/" + d.netns, "--", "dockerd",
		"--config-file", d.configFile(),
		"--storage-driver", driver,
		"--data-root", d.dataRoot,
		"--exec-root", d.execRoot(),
		"-H", d.host(),
		"--pidfile", d.pidFile()}
	cmd := exec.Command("nsenter", append(args, d.extra...)...)
	logPath := d.logPath
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	closeInheritedOnExec()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start dockerd in %s: %w", d.netns, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if exec.Command("docker", "-H", d.host(), "version", "--format", "{{.Server.Version}}").Run() == nil {
			return nil
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("dockerd in %s exited: %s", d.netns, tail(b, 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
	b, _ := os.ReadFile(logPath)
	return fmt.Errorf("dockerd in %s did not answer on %s within 60s: %s", d.netns, d.host(), tail(b, 20))
}

// loadImages moves every service's image from the host's engine into the
// node's, each once.
func (n *RefNode) loadImages() error {
	seen := map[string]bool{}
	var imgs []string
	for _, s := range n.Services {
		if !seen[s.Image] {
			seen[s.Image] = true
			imgs = append(imgs, s.Image)
		}
	}
	for _, img := range n.Images {
		if !seen[img] {
			seen[img] = true
			imgs = append(imgs, img)
		}
	}
	return n.LoadImages(imgs...)
}

// LoadImages moves local images of the host's engine into the node's:
// docker save | docker -H NODE load.
func (n *RefNode) LoadImages(imgs ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return n.engine().load(ctx, imgs...)
}

func (d dockerd) load(ctx context.Context, imgs ...string) error {
	if len(imgs) == 0 {
		return nil
	}
	save := exec.CommandContext(ctx, "docker", append([]string{"save"}, imgs...)...)
	load := exec.CommandContext(ctx, "docker", "-H", d.host(), "load", "-q")
	pipe, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	var saveErr, loadOut bytes.Buffer
	save.Stderr = &saveErr
	load.Stdin, load.Stdout, load.Stderr = pipe, &loadOut, &loadOut
	if err := save.Start(); err != nil {
		return err
	}
	lerr := load.Run()
	serr := save.Wait()
	if serr != nil {
		return fmt.Errorf("docker save %s (build them first): %v: %s", strings.Join(imgs, " "), serr, bytes.TrimSpace(saveErr.Bytes()))
	}
	if lerr != nil {
		return fmt.Errorf("docker load into %s: %v: %s", d.netns, lerr, bytes.TrimSpace(loadOut.Bytes()))
	}
	return nil
}

// stop removes the engine's containers (so no shim or mount outlives it),
// stops it by the pid in its pid file and unmounts what it left.
func (d dockerd) stop() error {
	b, err := os.ReadFile(d.pidFile())
	if err != nil {
		unmountUnder(d.execRoot())
		return nil // no engine ran (or it was removed already)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("engine pid file %s holds %q", d.pidFile(), b)
	}
	if ids, err := exec.Command("docker", "-H", d.host(), "ps", "-aq").Output(); err == nil {
		if f := strings.Fields(string(ids)); len(f) > 0 {
			_ = runCmd(nil, append([]string{"docker", "-H", d.host(), "rm", "-f", "-v"}, f...)...)
		}
	}
	if !isDockerd(pid) {
		_ = os.Remove(d.pidFile()) // a stale file: the pid is someone else's now
		unmountUnder(d.execRoot())
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && isDockerd(pid) {
		time.Sleep(100 * time.Millisecond)
	}
	if isDockerd(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		time.Sleep(200 * time.Millisecond)
	}
	_ = os.Remove(d.pidFile())
	unmountUnder(d.execRoot())
	unmountUnder(d.dataRoot)
	return nil
}

// isDockerd says whether pid is a running dockerd (not a zombie, not a
// recycled pid).
func isDockerd(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) {
		return false
	}
	return s[open+1:end] == "dockerd" && s[end+2] != 'Z'
}

// unmountUnder lazily unmounts every mount below dir, deepest first: a
// killed engine can leave its netns and overlay mounts behind.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return
	}
	defer f.Close()
	var mps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && strings.HasPrefix(fields[1], dir+"/") {
			mps = append(mps, fields[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mps)))
	for _, mp := range mps {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

func tail(b []byte, lines int) string {
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
