package cutover

// What the new container takes over from its predecessor: what
// the operator gave the predecessor, read from Docker on the node at Create,
// never from a request. "What the operator gave" is what differs from the
// predecessor's image: a variable or label its image set is left to the new
// image, so the new image's own defaults win.

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
)

// imageDefaults is the part of an image's configuration a container
// inherits unless told otherwise.
type imageDefaults struct {
	Env, Entrypoint, Cmd []string
	User, WorkingDir     string
	StopSignal           string
	Labels               map[string]string
}

// defaults reads an image's defaults; nil when the image is gone (a
// predecessor's image may have been removed by force).
func (e *Engine) defaults(ctx context.Context, ref string) *imageDefaults {
	img, err := e.cli.ImageInspect(ctx, ref)
	if err != nil || img.Config == nil {
		return nil
	}
	c := img.Config
	return &imageDefaults{Env: c.Env, Entrypoint: c.Entrypoint, Cmd: c.Cmd, User: c.User, WorkingDir: c.WorkingDir,
		StopSignal: c.StopSignal, Labels: c.Labels}
}

// made is the new container's configuration, and what it carried.
type made struct {
	cfg       *container.Config
	hc        *container.HostConfig
	primary   string                               // network given at create
	endpoints map[string]*network.EndpointSettings // every network, primary included
	carried   Carried
	// clashes: the module's values that conflict with the predecessor's.
	clashes []clash
}

// envName is the name in NAME=VALUE.
func envName(kv string) string { n, _, _ := strings.Cut(kv, "="); return n }

// carry builds the new container from spec and the predecessor c (nil for a
// new service). predImg is c's image's defaults (nil if gone: then a
// variable the new image sets is left to it), newImg the module image's.
func carry(spec Spec, c *container.InspectResponse, pred *Predecessor, predImg, newImg *imageDefaults) made {
	m := made{cfg: &container.Config{Image: spec.Image, Labels: map[string]string{}},
		hc: &container.HostConfig{RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled}}}
	cr := &m.carried
	env := map[string]string{}
	if c != nil && c.Config != nil {
		cr.From = strings.TrimPrefix(c.Name, "/")
		pc, hc := c.Config, c.HostConfig
		if hc == nil {
			hc = &container.HostConfig{}
		}
		// Environment: the operator's variables.
		fromImage := map[string]bool{}
		if predImg != nil {
			for _, kv := range predImg.Env {
				fromImage[kv] = true
			}
		} else if newImg != nil {
			for _, kv := range newImg.Env {
				fromImage[envName(kv)] = true
			}
		}
		for _, kv := range pc.Env {
			name, v, _ := strings.Cut(kv, "=")
			if fromImage[kv] || (predImg == nil && fromImage[name]) {
				cr.EnvImage = append(cr.EnvImage, name)
				continue
			}
			env[name] = v
			cr.Env = append(cr.Env, name)
		}
		// Labels: the operator's, never the mesh's own.
		for k, v := range pc.Labels {
			if strings.HasPrefix(k, "adoption.") {
				continue
			}
			if predImg != nil {
				if iv, ok := predImg.Labels[k]; ok && iv == v {
					continue
				}
			}
			m.cfg.Labels[k] = v
			cr.Labels = append(cr.Labels, k)
		}
		var img imageDefaults
		if predImg != nil {
			img = *predImg
		}
		set := func(name string, cond bool, apply func()) {
			if cond {
				apply()
				cr.Settings = append(cr.Settings, name)
			}
		}
		set("user", predImg != nil && pc.User != img.User, func() { m.cfg.User = pc.User })
		set("working_dir", predImg != nil && pc.WorkingDir != img.WorkingDir, func() { m.cfg.WorkingDir = pc.WorkingDir })
		if len(spec.Cmd) == 0 {
			set("entrypoint", predImg != nil && !slices.Equal(pc.Entrypoint, img.Entrypoint), func() { m.cfg.Entrypoint = pc.Entrypoint })
			set("cmd", predImg != nil && !slices.Equal(pc.Cmd, img.Cmd) && len(pc.Cmd) > 0, func() { m.cfg.Cmd = pc.Cmd })
		}
		set("hostname", pc.Hostname != "" && pc.Hostname != short(c.ID), func() { m.cfg.Hostname = pc.Hostname })
		set("domainname", pc.Domainname != "", func() { m.cfg.Domainname = pc.Domainname })
		set("stop_signal", predImg != nil && pc.StopSignal != "" && pc.StopSignal != img.StopSignal, func() { m.cfg.StopSignal = pc.StopSignal })
		set("stop_timeout", pc.StopTimeout != nil, func() { m.cfg.StopTimeout = pc.StopTimeout })
		set("tty", pc.Tty || pc.OpenStdin, func() { m.cfg.Tty, m.cfg.OpenStdin, m.cfg.StdinOnce = pc.Tty, pc.OpenStdin, pc.StdinOnce })
		set("extra_hosts", len(hc.ExtraHosts) > 0, func() { m.hc.ExtraHosts = hc.ExtraHosts })
		set("dns", len(hc.DNS)+len(hc.DNSSearch)+len(hc.DNSOptions) > 0, func() {
			m.hc.DNS, m.hc.DNSSearch, m.hc.DNSOptions = hc.DNS, hc.DNSSearch, hc.DNSOptions
		})
		set("capabilities", len(hc.CapAdd)+len(hc.CapDrop) > 0 || hc.Privileged, func() {
			m.hc.CapAdd, m.hc.CapDrop, m.hc.Privileged = hc.CapAdd, hc.CapDrop, hc.Privileged
		})
		set("security_opt", len(hc.SecurityOpt) > 0, func() { m.hc.SecurityOpt = hc.SecurityOpt })
		set("sysctls", len(hc.Sysctls) > 0, func() { m.hc.Sysctls = hc.Sysctls })
		set("group_add", len(hc.GroupAdd) > 0, func() { m.hc.GroupAdd = hc.GroupAdd })
		set("init", hc.Init != nil, func() { m.hc.Init = hc.Init })
		set("tmpfs", len(hc.Tmpfs) > 0, func() { m.hc.Tmpfs = hc.Tmpfs })
		set("shm_size", hc.ShmSize > 0 && hc.ShmSize != 64<<20, func() { m.hc.ShmSize = hc.ShmSize })
		// Resources carry as a whole: devices, ulimits, memory, CPU, pids.
		m.hc.Resources = hc.Resources
		set("devices", len(hc.Devices) > 0, func() {})
		set("ulimits", len(hc.Ulimits) > 0, func() {})
		r := hc.Resources
		set("resource_limits", r.Memory+r.MemoryReservation+r.MemorySwap+r.NanoCPUs+r.CPUQuota+r.CPUShares > 0 ||
			(r.PidsLimit != nil && *r.PidsLimit > 0) || r.CpusetCpus != "" || r.BlkioWeight > 0, func() {})
		set("log_driver", hc.LogConfig.Type != "" && (hc.LogConfig.Type != "json-file" || len(hc.LogConfig.Config) > 0), func() {})
		m.hc.LogConfig = hc.LogConfig
		// Mounts: the data stays in place.
		if pred != nil {
			for _, pm := range pred.Mounts {
				mm := mount.Mount{Type: mount.Type(pm.Type), Target: pm.Destination, ReadOnly: pm.ReadOnly}
				switch mm.Type {
				case mount.TypeVolume:
					mm.Source = pm.Name // the same volume, anonymous ones included: reattached, not recreated
				case mount.TypeBind:
					mm.Source = pm.Source
					if pm.Propagation != "" {
						mm.BindOptions = &mount.BindOptions{Propagation: mount.Propagation(pm.Propagation)}
					}
				case mount.TypeTmpfs:
					if _, ok := hc.Tmpfs[pm.Destination]; ok {
						continue // carried as --tmpfs above
					}
				}
				m.hc.Mounts = append(m.hc.Mounts, mm)
			}
			if len(m.hc.Mounts) > 0 {
				cr.Settings = append(cr.Settings, "mounts")
			}
		}
		m.primary, m.endpoints = endpoints(c)
		mode := string(hc.NetworkMode)
		switch {
		case mode == "host" || mode == "none" || strings.HasPrefix(mode, "container:"):
			m.hc.NetworkMode = hc.NetworkMode
			cr.Settings = append(cr.Settings, "network_mode")
		case m.primary != "":
			m.hc.NetworkMode = container.NetworkMode(m.primary)
			cr.Settings = append(cr.Settings, "networks")
		}
		cr.Settings = append(cr.Settings, "restart_policy")
	}
	// The module's own, over the predecessor's, unless kept or decided
	// for the node; a different value neither is a conflict.
	keep := map[string]bool{}
	for _, k := range spec.Keep {
		keep[k] = true
	}
	for _, name := range sortedKeys(spec.Env) {
		pv, had := env[name]
		v, kept, c := settle(spec, keep, KeyEnv+name, name, pv, spec.Env[name], had)
		env[name] = v
		if c != nil {
			m.clashes = append(m.clashes, *c)
		}
		if kept {
			cr.Kept = append(cr.Kept, "env "+name)
			continue
		}
		cr.EnvSet = append(cr.EnvSet, name)
	}
	for _, name := range sortedKeys(env) {
		m.cfg.Env = append(m.cfg.Env, name+"="+env[name])
	}
	for _, k := range sortedKeys(spec.Labels) {
		pv, had := m.cfg.Labels[k]
		v, kept, c := settle(spec, keep, KeyLabel+k, k, pv, spec.Labels[k], had)
		m.cfg.Labels[k] = v
		if c != nil {
			m.clashes = append(m.clashes, *c)
		}
		if kept {
			cr.Kept = append(cr.Kept, "label "+k)
			continue
		}
		cr.Changed = append(cr.Changed, "label "+k)
	}
	if len(spec.Cmd) > 0 {
		m.cfg.Cmd = spec.Cmd
		cr.Changed = append(cr.Changed, "cmd")
	}
	if len(spec.Ports) > 0 {
		cr.Changed = append(cr.Changed, "ports")
	}
	for _, p := range spec.DropPorts {
		cr.Changed = append(cr.Changed, "drop port "+p)
	}
	if spec.RestartPolicy != "" {
		cr.Changed = append(cr.Changed, "restart_policy")
	}
	for _, l := range [][]string{cr.Env, cr.EnvImage, cr.Labels} {
		sort.Strings(l)
	}
	return m
}

// endpoints are c's networks as the new container should join them: the
// same aliases (less the ones Docker adds itself), static addresses, links
// and driver options. primary is the network of its network mode.
func endpoints(c *container.InspectResponse) (string, map[string]*network.EndpointSettings) {
	if c.NetworkSettings == nil || len(c.NetworkSettings.Networks) == 0 {
		return "", nil
	}
	mode := ""
	if c.HostConfig != nil {
		mode = string(c.HostConfig.NetworkMode)
	}
	if mode == "host" || mode == "none" || strings.HasPrefix(mode, "container:") {
		return "", nil
	}
	name := strings.TrimPrefix(c.Name, "/")
	out := map[string]*network.EndpointSettings{}
	for n, ep := range c.NetworkSettings.Networks {
		es := &network.EndpointSettings{}
		if ep != nil {
			for _, a := range ep.Aliases {
				if a != short(c.ID) && a != name {
					es.Aliases = append(es.Aliases, a)
				}
			}
			if ep.IPAMConfig != nil && (ep.IPAMConfig.IPv4Address != "" || ep.IPAMConfig.IPv6Address != "" || len(ep.IPAMConfig.LinkLocalIPs) > 0) {
				ipam := *ep.IPAMConfig
				es.IPAMConfig = &ipam
			}
			es.Links, es.DriverOpts = ep.Links, ep.DriverOpts
		}
		out[n] = es
	}
	primary := mode
	if primary == "default" || primary == "" {
		primary = "bridge"
	}
	if _, ok := out[primary]; !ok {
		primary = sortedKeys(out)[0]
	}
	return primary, out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
