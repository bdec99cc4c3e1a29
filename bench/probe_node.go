package main

// This file holds the probe's node: a namespace with the control node's
// ufw ruleset, listeners, Docker containers and declared files, and its
// cleanup.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/go-connections/nat"

	"adoption/bench/benchns"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/ufwfixture"
)

// saveFixture writes the node's ruleset as the firewall lists it and its
// interfaces as the evaluator reads them, in the shape of the fixtures in
// internal/fwtest/testdata/dnat: its unit tests and BenchmarkOpenPorts
// evaluate exactly what this section's probe evaluates, without a kernel.
func (p *probeNode) saveFixture(file string) error {
	insp := eval.Inspector{Netns: p.ns.Path}
	rs, err := insp.Ruleset()
	if err != nil {
		return err
	}
	node, err := insp.Node()
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(struct {
		Ruleset *firewall.Ruleset `json:"ruleset"`
		Node    firewall.Node     `json:"node"`
	}{rs, node}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}

func command(name string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", name, err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.String(), nil
}

func (p *probeNode) setup() error {
	var err error
	if p.ns, err = benchns.New("pr"); err != nil {
		return err
	}
	if _, err := p.ns.Run([]byte(ufwfixture.Control4(p.k*probeRulesIn, p.k*probeRulesFwd)), "iptables-restore"); err != nil {
		return fmt.Errorf("load the IPv4 firewall: %w", err)
	}
	if _, err := p.ns.Run([]byte(ufwfixture.Control6(p.k*probeRulesIn)), "ip6tables-restore"); err != nil {
		return fmt.Errorf("load the IPv6 firewall: %w", err)
	}
	for _, l := range []struct {
		proto string
		port  int
	}{{"tcp", 22}, {"tcp", 25}, {"tcp", 53}, {"udp", 53}, {"tcp", 80}, {"tcp", 443}, {"tcp", 587}, {"tcp", 993},
		{"udp", 123}, {"tcp", 5000}, {"tcp", 8080}, {"tcp", 8443}, {"tcp", 9100}} {
		c, err := p.ns.Serve(l.proto, l.port)
		if err != nil {
			return fmt.Errorf("listen %d/%s: %w", l.port, l.proto, err)
		}
		p.listeners = append(p.listeners, c)
	}
	dir, err := os.MkdirTemp("", "bn-probe-")
	if err != nil {
		return err
	}
	p.root, p.stateDir = filepath.Join(dir, "root"), filepath.Join(dir, "state")
	sizes := []int{120, 310, 520, 900, 1400, 2100, 3300, 4800, 8200, 16 << 10, 64 << 10, 200 << 10}
	for i, path := range []string{
		"/etc/hosts", "/etc/resolv.conf", "/etc/ssh/sshd_config.d/predecessor.conf", "/etc/default/ufw",
		"/etc/docker/daemon.json", "/etc/systemd/system/predecessor-sync.service", "/srv/mail/postfix/main.cf",
		"/srv/mail/dovecot/dovecot.conf", "/srv/web/nginx.conf", "/srv/app/app.env", "/srv/registry/config.yml",
		"/etc/ssl/certs/ca-bundle.crt",
	} {
		full := filepath.Join(p.root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		b := make([]byte, sizes[i])
		rand.Read(b)
		if err := os.WriteFile(full, b, 0o640); err != nil {
			return err
		}
		p.paths = append(p.paths, path)
	}
	return p.containers()
}

// containers creates 60 containers (not started) from a one-file image:
// labels, a named volume, a read-only bind and a published port each, as a
// predecessor's services carry them. An unreachable engine leaves p.real
// false (the section then uses simulated records, and says so).
func (p *probeNode) containers() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(max(p.k, 1))*2*time.Minute)
	defer cancel()
	cli, err := dockerClient(ctx)
	if err != nil {
		return nil
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return nil
	}
	p.cli, p.image = cli, p.prefix+"img:1"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("#!/bin/true\n")
	if err := tw.WriteHeader(&tar.Header{Name: "svc", Mode: 0o755, Size: int64(len(body)), ModTime: time.Now()}); err != nil {
		return err
	}
	tw.Write(body)
	tw.Close()
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, p.image,
		image.ImportOptions{Changes: []string{`ENTRYPOINT ["/svc"]`}})
	if err != nil {
		return fmt.Errorf("import %s: %w", p.image, err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	bind := filepath.Join(filepath.Dir(p.root), "bind")
	if err := os.MkdirAll(bind, 0o755); err != nil {
		return err
	}
	for i := 0; i < p.k*probeContainers; i++ {
		mod := probeModules[i%len(probeModules)]
		name := p.containerName(i)
		port := fmt.Sprintf("%d", 31000+i) // 31000-31599 at 10 times
		_, err := cli.ContainerCreate(ctx, &container.Config{
			Image:        p.image,
			Labels:       map[string]string{"com.predecessor.module": mod, "com.predecessor.instance": fmt.Sprint(i)},
			ExposedPorts: nat.PortSet{"8080/tcp": {}},
		}, &container.HostConfig{
			Binds:         []string{name + "-data:/data", bind + ":/config:ro"},
			PortBindings:  nat.PortMap{"8080/tcp": {{HostIP: "127.0.0.1", HostPort: port}}},
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		}, nil, nil, name)
		if err != nil {
			return fmt.Errorf("create container %s: %w", name, err)
		}
	}
	p.real = true
	return nil
}

var probeModules = []string{"mail", "web", "db", "registry", "app", "queue", "cache", "dns", "monitor", "backup"}

func (p *probeNode) containerName(i int) string {
	return fmt.Sprintf("%s%s-%02d", p.prefix, probeModules[i%len(probeModules)], i)
}

func (p *probeNode) cleanup() {
	p.listeners.Close()
	p.ns.Del()
	if p.root != "" {
		os.RemoveAll(filepath.Dir(p.root))
	}
	if p.cli == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(max(p.k, 1))*2*time.Minute)
	defer cancel()
	list, _ := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("name", p.prefix))})
	for _, c := range list {
		if len(c.Names) > 0 && strings.HasPrefix(strings.TrimPrefix(c.Names[0], "/"), p.prefix) {
			p.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) //nolint:errcheck
		}
	}
	for i := 0; i < p.k*probeContainers; i++ {
		p.cli.VolumeRemove(ctx, p.containerName(i)+"-data", true) //nolint:errcheck
	}
	p.cli.ImageRemove(ctx, p.image, image.RemoveOptions{Force: true, PruneChildren: true}) //nolint:errcheck
	p.cli.Close()
}

// simulatedNames are the simulated engine's containers when Docker is
// unreachable.
func simulatedNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%02d", i)
	}
	return names
}
