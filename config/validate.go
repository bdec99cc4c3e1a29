package config

import (
	"fmt"
	"net"
	"path"
	"sort"
	"strings"

	"adoption/keyfile"
)

// Validate checks the whole configuration and returns a *ValidationError that
// lists every problem, each naming its key, its value and what to do.
func (c *Config) Validate() error {
	v := &validator{}
	v.temporal(c.Temporal)
	v.node(c.Node)
	for i, name := range c.Predecessor.Control {
		if name == "" || strings.ContainsAny(name, "/\x00") {
			v.addf("predecessor.control[%d]", name, "an executable name without '/' (the name as in /proc/PID/comm or the executable's base name)", i)
		}
	}

	claimed := map[Port]string{} // which key first claimed a port
	claim := func(key, spec string) {
		p, err := ParsePort(spec)
		if err != nil {
			v.add(key, spec, err.Error()+"; write PORT/PROTO with PORT 1-65535 and PROTO tcp or udp, e.g. 8080/tcp")
			return
		}
		if first, ok := claimed[p]; ok {
			v.add(key, spec, fmt.Sprintf("port %s is already claimed by %s; give each a port of its own", p, first))
			return
		}
		claimed[p] = key
	}
	for _, name := range sortedKeys(c.Foundation.Ports) {
		key := "foundation.ports." + name
		if !ValidName(name) {
			v.add(key, name, "the port's name must be "+NameRule)
		}
		claim(key, c.Foundation.Ports[name])
	}
	for i, ct := range c.Foundation.Containers {
		v.container(fmt.Sprintf("foundation.containers[%d]", i), ct)
	}

	paths := map[string]string{}
	file := func(key string, f File) {
		v.path(key+".path", f.Path)
		if f.Mode != "" {
			var m uint32
			if _, err := fmt.Sscanf(f.Mode, "%o", &m); err != nil || m > 0o7777 || strings.TrimLeft(f.Mode, "01234567") != "" {
				v.add(key+".mode", f.Mode, "an octal file mode such as 0644")
			}
		}
		if f.Format != "" {
			if _, err := keyfile.ParseFormat(f.Format); err != nil {
				v.add(key+".format", f.Format, "one of spaced (sshd_config), env (KEY=value) or ini; leave it empty to infer it from the path")
			}
		}
		if len(f.Keep) > 0 && f.Format == "" && keyfile.Infer(f.Path) == "" {
			v.add(key+".keep", strings.Join(f.Keep, ","), fmt.Sprintf("keep needs a file read per key, and the format of %s is not known: set %s.format to spaced, env or ini, or remove keep to replace the file whole", f.Path, key))
		}
		for k, kk := range f.Keep {
			if strings.TrimSpace(kk) == "" || strings.ContainsAny(kk, "\n\r=") {
				v.add(fmt.Sprintf("%s.keep[%d]", key, k), kk, "a key name as it appears in the file (Port, AllowUsers, section.key), without '=' or line breaks")
			}
		}
		if first, ok := paths[f.Path]; ok && f.Path != "" {
			v.add(key+".path", f.Path, "already declared by "+first+"; a path has one owner")
		} else {
			paths[f.Path] = key
		}
	}

	modules := map[string]bool{}
	for i, m := range c.Modules {
		key := fmt.Sprintf("modules[%d]", i)
		if !ValidName(m.Name) {
			v.add(key+".name", m.Name, "a module name must be "+NameRule)
		} else if modules[m.Name] {
			v.add(key+".name", m.Name, "another module has this name; names are unique")
		}
		modules[m.Name] = true
		if m.Name == "foundation" {
			v.add(key+".name", m.Name, "'foundation' is the owner name of the foundation's ports; choose another module name")
		}
		for j, p := range m.Ports {
			claim(fmt.Sprintf("%s.ports[%d]", key, j), p)
		}
		if m.Container != nil {
			v.container(key+".container", *m.Container)
		}
		for j, f := range m.Files {
			file(fmt.Sprintf("%s.files[%d]", key, j), f)
		}
		if m.Health != nil {
			v.health(key+".health", *m.Health)
		}
	}
	for i, f := range c.NodeFiles {
		file(fmt.Sprintf("node_files[%d]", i), f)
	}
	for i, p := range c.Flip.Drop {
		if _, err := ParsePort(p); err != nil {
			v.add(fmt.Sprintf("flip.drop[%d]", i), p, err.Error()+"; write PORT/PROTO, e.g. 25/tcp")
		}
	}
	if c.Flip.ConfirmTimeout <= 0 {
		v.add("flip.confirm_timeout", c.Flip.ConfirmTimeout.String(), "a positive duration such as 2m")
	}
	if c.Firewall.ReconcileInterval < 0 {
		v.add("firewall.reconcile_interval", c.Firewall.ReconcileInterval.String(), "a duration of 0 (off) or more, such as 1m")
	}
	if c.Drift.Interval < 0 {
		v.add("drift.interval", c.Drift.Interval.String(), "a duration of 0 (off) or more, such as 5m")
	}
	if c.Cutover.StopTimeout < 0 {
		v.add("cutover.stop_timeout", c.Cutover.StopTimeout.String(), "a duration of 0 or more, such as 10s")
	}
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: v.problems}
}

type validator struct{ problems []string }

func (v *validator) add(key, value, want string) {
	v.problems = append(v.problems, fmt.Sprintf("%s: %q is invalid: %s", key, value, want))
}

func (v *validator) addf(keyFmt, value, want string, args ...any) {
	v.add(fmt.Sprintf(keyFmt, args...), value, want)
}

func (v *validator) temporal(t Temporal) {
	if _, port, err := net.SplitHostPort(t.Address); err != nil || port == "" {
		v.add("temporal.address", t.Address, "HOST:PORT of the Temporal frontend, e.g. 127.0.0.1:7233")
	}
	if t.Namespace == "" {
		v.add("temporal.namespace", t.Namespace, "the Temporal namespace, e.g. default")
	}
	if (t.TLS.Cert == "") != (t.TLS.Key == "") {
		v.add("temporal.tls.cert", t.TLS.Cert, "set temporal.tls.cert and temporal.tls.key together (key is "+fmt.Sprintf("%q", t.TLS.Key)+")")
	}
}

func (v *validator) node(n Node) {
	if n.Name == "" {
		v.add("node.name", n.Name, "required: the node's name ("+NameRule+"); set it in the file or ADOPT_NODE_NAME")
	} else if !ValidName(n.Name) {
		v.add("node.name", n.Name, "a node name must be "+NameRule)
	}
	if n.Role != "control" && n.Role != "member" {
		v.add("node.role", n.Role, "either control or member")
	}
	if n.Netns != "" && !path.IsAbs(n.Netns) {
		v.add("node.netns", n.Netns, "an absolute path of a network namespace such as /run/netns/n1, or empty for the worker's own")
	}
	for key, p := range map[string]string{"node.root": n.Root, "node.state_dir": n.StateDir} {
		if !path.IsAbs(p) || path.Clean(p) != p {
			v.add(key, p, "a clean absolute path")
		}
	}
	for i, p := range n.ManagementPorts {
		if _, err := ParsePort(p); err != nil {
			v.addf("node.management_ports[%d]", p, err.Error()+"; write PORT/PROTO, e.g. 22/tcp", i)
		}
	}
}

// path checks a declared path: absolute, clean, no "..", so that it names a
// place under node.root. Symlinks are resolved at run time through os.Root.
func (v *validator) path(key, p string) {
	switch {
	case p == "":
		v.add(key, p, "required: an absolute path under node.root, e.g. /etc/hosts")
	case !path.IsAbs(p):
		v.add(key, p, "must be absolute (it is taken under node.root), e.g. /etc/hosts")
	case strings.Contains(p, "\x00"):
		v.add(key, p, "must not contain NUL")
	case path.Clean(p) != p || strings.Contains(p, ".."):
		v.add(key, p, "must be a clean path without '..' so it cannot leave node.root")
	case p == "/":
		v.add(key, p, "must name a file, not the root")
	}
}

func (v *validator) container(key string, ct Container) {
	if !ValidName(ct.Name) {
		v.add(key+".name", ct.Name, "a container name must be "+NameRule)
	}
	if ct.Image == "" || strings.ContainsAny(ct.Image, " \t\n") {
		v.add(key+".image", ct.Image, "required: a local image reference such as mail:2.1")
	}
	for _, hp := range sortedKeys(ct.Ports) {
		// Split at the last ':' as the cutover does, so [::1]:8080/tcp works.
		port := hp
		if i := strings.LastIndex(hp, ":"); i >= 0 {
			if net.ParseIP(strings.Trim(hp[:i], "[]")) == nil {
				v.add(key+".ports", hp, "the host address before ':' is not an IP address; keys are [IP:]PORT/PROTO, e.g. 127.0.0.1:8080/tcp or [::1]:8080/tcp")
			}
			port = hp[i+1:]
		}
		host, herr := ParsePort(port)
		if herr != nil {
			v.add(key+".ports", hp, herr.Error()+"; keys are host [IP:]PORT/PROTO")
		}
		cont, cerr := ParsePort(ct.Ports[hp])
		if cerr != nil {
			v.add(key+".ports."+hp, ct.Ports[hp], cerr.Error()+"; values are container PORT/PROTO")
		}
		if herr == nil && cerr == nil && host.Proto != cont.Proto {
			v.add(key+".ports."+hp, ct.Ports[hp], "the container port's protocol must be the host port's ("+host.Proto+")")
		}
	}
}

func (v *validator) health(key string, h Health) {
	if (h.TCP == "") == (h.HTTP == "") {
		v.add(key, fmt.Sprintf("tcp=%s http=%s", h.TCP, h.HTTP), "set exactly one of tcp (HOST:PORT) or http (a URL)")
	}
	if h.TCP != "" {
		if _, _, err := net.SplitHostPort(h.TCP); err != nil {
			v.add(key+".tcp", h.TCP, "HOST:PORT, e.g. 127.0.0.1:8080")
		}
	}
	if h.HTTP != "" && !strings.HasPrefix(h.HTTP, "http://") && !strings.HasPrefix(h.HTTP, "https://") {
		v.add(key+".http", h.HTTP, "an http:// or https:// URL")
	}
	if h.Timeout < 0 {
		v.add(key+".timeout", h.Timeout.String(), "a positive duration such as 5s")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
