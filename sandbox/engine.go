package sandbox

// This file holds the reference node's own Docker engine: a dockerd run in
// the node's network namespace (nsenter --net: `ip netns exec` remounts
// /sys and hides the cgroup mounts dockerd needs), with its own data root,
// exec root, socket and pid file, so it manages the node's iptables-nft
// rules (DOCKER, DOCKER-USER, DNAT) as the seed's engine does. Images move
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

func (n *RefNode) enginePid() string  { return filepath.Join(n.RunDir, "docker.pid") }
func (n *RefNode) execRoot() string   { return filepath.Join(n.RunDir, "exec") }
func (n *RefNode) dataRoot() string   { return filepath.Join(n.Dir, "engine") }
func (n *RefNode) engineConf() string { return filepath.Join(n.RunDir, "daemon.json") }

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

// startEngine runs dockerd in the node's namespace and waits until it
// answers. The host's /etc/docker/daemon.json sets data-root, which the
// flag would conflict with: an empty config file of its own avoids both.
func (n *RefNode) startEngine() error {
	driver, err := hostDriver()
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.engineConf(), []byte("{}\n"), 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll(n.dataRoot(), 0o711); err != nil {
		return err
	}
	cmd := exec.Command("nsenter", "--net="+n.NetnsPath(), "--", "dockerd",
		"--config-file", n.engineConf(),
		"--storage-driver", driver,
		"--data-root", n.dataRoot(),
		"--exec-root", n.execRoot(),
		"-H", n.DockerHost(),
		"--pidfile", n.enginePid())
	logPath := filepath.Join(n.Dir, "dockerd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	closeInheritedOnExec()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start dockerd in %s: %w", n.Netns, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if exec.Command("docker", "-H", n.DockerHost(), "version", "--format", "{{.Server.Version}}").Run() == nil {
			return nil
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("dockerd in %s exited: %s", n.Netns, tail(b, 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
	b, _ := os.ReadFile(logPath)
	return fmt.Errorf("dockerd in %s did not answer on %s within 60s: %s", n.Netns, n.DockerHost(), tail(b, 20))
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
	if len(imgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	save := exec.CommandContext(ctx, "docker", append([]string{"save"}, imgs...)...)
	load := exec.CommandContext(ctx, "docker", "-H", n.DockerHost(), "load", "-q")
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
		return fmt.Errorf("docker load into %s: %v: %s", n.Netns, lerr, bytes.TrimSpace(loadOut.Bytes()))
	}
	return nil
}

// stopEngine removes the engine's containers (so no shim or mount outlives
// it), stops it by the pid in its pid file and unmounts what it left.
func (n *RefNode) stopEngine() error {
	b, err := os.ReadFile(n.enginePid())
	if err != nil {
		n.unmountUnder(n.execRoot())
		return nil // no engine ran (or it was removed already)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("engine pid file %s holds %q", n.enginePid(), b)
	}
	if ids, err := exec.Command("docker", "-H", n.DockerHost(), "ps", "-aq").Output(); err == nil {
		if f := strings.Fields(string(ids)); len(f) > 0 {
			_ = runCmd(nil, append([]string{"docker", "-H", n.DockerHost(), "rm", "-f", "-v"}, f...)...)
		}
	}
	if !isDockerd(pid) {
		_ = os.Remove(n.enginePid()) // a stale file: the pid is someone else's now
		n.unmountUnder(n.execRoot())
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
	_ = os.Remove(n.enginePid())
	n.unmountUnder(n.execRoot())
	n.unmountUnder(n.dataRoot())
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
func (n *RefNode) unmountUnder(dir string) {
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
