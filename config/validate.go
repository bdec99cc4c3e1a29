package config

import (
	"fmt"
	"net"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"adoption/keyfile"
)

// Validate checks the whole configuration and returns a *ValidationError that
// lists every problem, each naming its key, its value and what to do.
func (c *Config) Validate() error {
	v := &validator{}
	v.temporal(c.Temporal)
	v.docker(c.Docker)
	v.node(c.Node)
	v.operate(c.Metrics, c.Log)
	v.authority(c.Authority, c.Operator)
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
			if _, err := ParseMode(f.Mode); err != nil {
				v.add(key+".mode", f.Mode, "an octal file mode of 3 or 4 digits such as 0644 or 4755 (at most 7777)")
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
		if why := moduleNameProblem(m.Name, modules[m.Name]); why != "" {
			v.add(key+".name", m.Name, why)
		}
		modules[m.Name] = true
		for j, p := range m.Ports {
			claim(fmt.Sprintf("%s.ports[%d]", key, j), p)
		}
		if m.Container != nil {
			v.container(key+".container", *m.Container)
			v.carry(key+".container", m.Name, *m.Container, c.Modules)
		}
		for j, f := range m.Files {
			file(fmt.Sprintf("%s.files[%d]", key, j), f)
		}
		if m.Health != nil {
			v.health(key+".health", *m.Health)
		}
		switch {
		case m.Cutover != "" && m.Cutover != CutoverSwap && m.Cutover != CutoverOverlap:
			v.add(key+".cutover", m.Cutover, "swap (the default: the predecessor stopped, then the new container started) or overlap (the new container started beside the predecessor; only for a service that allows two instances on its data)")
		case m.Cutover == CutoverOverlap && m.Container == nil:
			v.add(key+".cutover", m.Cutover, "overlap starts a new container beside its predecessor, and module "+m.Name+" has no container: remove cutover, or declare container")
		}
		if m.Container != nil {
			for j, x := range m.Container.Exclusive {
				if !dockerVolumeName.MatchString(x) {
					v.addf("%s.container.exclusive[%d]", x, "the name of a Docker named volume (letters, digits, _ . -, starting with a letter or digit)", key, j)
				}
			}
		}
		if m.ReplacesUnit != "" {
			switch {
			case m.Container == nil:
				v.add(key+".replaces_unit", m.ReplacesUnit, "a predecessor unit is handed over to the module's container, and module "+m.Name+" has no container: declare container, or remove replaces_unit and stop the unit by hand")
			case m.Cutover == CutoverOverlap:
				v.add(key+".replaces_unit", m.ReplacesUnit, "an overlap cutover starts the container beside its predecessor container; a unit is handed over by the swap: remove cutover: overlap")
			case !ValidUnitName(m.ReplacesUnit):
				v.add(key+".replaces_unit", m.ReplacesUnit, UnitNameRule+"; write the unit as systemctl names it, e.g. replaces_unit: dnsmasq.service")
			}
		}
		if m.ReplacesExe != "" {
			switch {
			case m.ReplacesUnit != "":
				v.add(key+".replaces_exe", m.ReplacesExe, "a module replaces one host predecessor: keep replaces_unit (a process a unit runs is stopped through its unit), or remove it")
			case m.Container == nil:
				v.add(key+".replaces_exe", m.ReplacesExe, "a predecessor executable is handed over to the module's container, and module "+m.Name+" has no container: declare container, or remove replaces_exe")
			case m.Cutover == CutoverOverlap:
				v.add(key+".replaces_exe", m.ReplacesExe, "an executable is handed over by the swap: remove cutover: overlap")
			case !ValidExeName(m.ReplacesExe):
				v.add(key+".replaces_exe", m.ReplacesExe, ExeNameRule+"; e.g. replaces_exe: dnsmasq")
			}
		}
		for j, h := range m.Holders {
			switch {
			case m.Container != nil:
				v.addf("%s.holders[%d]", h, "holders name a host service's own executables; a container module's ports may be held only by its predecessor container and those it replaces (container.replaces): remove holders", key, j)
			case h == "" || strings.ContainsAny(h, "/\x00"):
				v.addf("%s.holders[%d]", h, "an executable name without '/' (the base name of the module's own service, as in /proc/PID/exe)", key, j)
			}
		}
	}
	for i, f := range c.NodeFiles {
		file(fmt.Sprintf("node_files[%d]", i), f)
	}
	for i, p := range c.Flip.Drop {
		if _, _, err := ParseDeclared(p); err != nil {
			v.add(fmt.Sprintf("flip.drop[%d]", i), p, err.Error()+"; write PORT/PROTO, FROM-TO/PROTO or a region of packets, e.g. 25/tcp, 9000-9010/tcp, ip icmp type 13 or ip udp to 239.255.255.250 dport 1900")
		}
	}
	for i, p := range c.Flip.Widen {
		if _, _, err := ParseDeclared(p); err != nil {
			v.add(fmt.Sprintf("flip.widen[%d]", i), p, err.Error()+"; write PORT/PROTO, FROM-TO/PROTO or a region of packets, e.g. 8080/tcp, 9000-9010/tcp, ip icmp type 13 or ip udp to 239.255.255.250 dport 1900")
		}
	}
	v.witness(c.Flip.Witness)
	v.duration("flip.confirm_timeout", c.Flip.ConfirmTimeout)
	v.duration("flip.max_confirm_timeout", c.Flip.MaxConfirmTimeout)
	if c.Flip.ConfirmTimeout > c.Flip.MaxConfirmTimeout && c.Flip.MaxConfirmTimeout > 0 {
		v.add("flip.confirm_timeout", c.Flip.ConfirmTimeout.String(), "at most flip.max_confirm_timeout ("+c.Flip.MaxConfirmTimeout.String()+"); a flip that cut the node off must revert soon")
	}
	v.stateDir(c.Node, paths)
	v.duration("firewall.reconcile_interval", c.Firewall.ReconcileInterval)
	v.duration("drift.interval", c.Drift.Interval)
	v.duration("cutover.stop_timeout", c.Cutover.StopTimeout)
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: v.problems}
}

// dockerVolumeName is the Docker engine's own rule for a volume's name.
var dockerVolumeName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

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
	for _, kv := range [][2]string{{"temporal.tls.cert", t.TLS.Cert}, {"temporal.tls.key", t.TLS.Key}, {"temporal.tls.ca", t.TLS.CA}} {
		if kv[1] != "" && !path.IsAbs(kv[1]) {
			v.add(kv[0], kv[1], "an absolute path of a PEM file")
		}
	}
	if t.TLS.ServerName != "" && (strings.ContainsAny(t.TLS.ServerName, " /:\x00") || len(t.TLS.ServerName) > 253) {
		v.add("temporal.tls.server_name", t.TLS.ServerName, "a DNS name, the one in the server's certificate")
	}
	if (t.TLS.Cert == "") != (t.TLS.Key == "") {
		v.add("temporal.tls.cert", t.TLS.Cert, "set temporal.tls.cert and temporal.tls.key together (key is "+fmt.Sprintf("%q", t.TLS.Key)+")")
	}
	switch {
	case t.TLS.Mode != "" && t.TLS.Mode != TLSOff:
		v.add("temporal.tls.mode", t.TLS.Mode, `"off" (plain text, explicitly) or empty (TLS when temporal.tls.cert, .key, .ca or .server_name is set)`)
	case t.TLS.Mode == TLSOff && t.TLS.Enabled():
		v.add("temporal.tls.mode", t.TLS.Mode, "off contradicts the temporal.tls.cert/.key/.ca/.server_name set beside it: remove mode: off for TLS, or those keys for plain text")
	case t.TLS.Mode == "" && !t.TLS.Enabled() && !LoopbackAddress(t.Address):
		v.add("temporal.address", t.Address, "not a loopback address, and no TLS is configured: the agent and the workflows would talk to Temporal in plain text across the network. "+
			"Set temporal.tls.ca (and temporal.tls.cert and .key for mTLS), or, to use plain text on purpose, set temporal.tls.mode: off (ADOPT_TEMPORAL_TLS_MODE=off)")
	}
}

// LoopbackAddress reports whether a HOST:PORT names this host only:
// localhost or a loopback IP. A name that must be resolved is not.
func LoopbackAddress(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return true // reported as malformed already
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// stateDir refuses a state_dir that is a declared path or lies inside or
// around one: converging or restoring that path would overwrite the
// custody store, or the custody store would hold a declared file's place.
func (v *validator) stateDir(n Node, declared map[string]string) {
	if !path.IsAbs(n.StateDir) || !path.IsAbs(n.Root) {
		return // reported by node()
	}
	for _, p := range sortedKeys(declared) {
		if p == "" || !path.IsAbs(p) {
			continue
		}
		full := path.Join(n.Root, p)
		if within(n.StateDir, full) || within(full, n.StateDir) {
			v.add("node.state_dir", n.StateDir, fmt.Sprintf("must not be inside or around the declared path %s (%s, under node.root %s); choose a state_dir outside every declared path", p, declared[p], n.Root))
		}
	}
}

// within reports whether p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
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

// path checks a declared path (pathProblem).
func (v *validator) path(key, p string) {
	if why := pathProblem(p); why != "" {
		v.add(key, p, why)
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

// EnvNameOK says whether s can name an environment variable: not empty, no
// '=', NUL or white space (Docker would split or refuse it).
func EnvNameOK(s string) bool {
	return s != "" && !strings.ContainsAny(s, "= \t\n\r\x00")
}

// dockerName is Docker's rule for container names; a predecessor's name is
// the operator's, not the mesh's, so it follows Docker's rule, not NameRule.
var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

// carry checks the keys that say what the module's container takes over
// from its predecessors: env, env_file, labels, keep, drop_ports, replaces.
func (v *validator) carry(key, module string, ct Container, all []Module) {
	names := map[string]bool{}
	for i, kv := range ct.Env {
		name, _, ok := strings.Cut(kv, "=")
		k := fmt.Sprintf("%s.env[%d]", key, i)
		switch {
		case !ok || !EnvNameOK(name):
			// The value may be a secret: only the name is shown.
			v.add(k, fmt.Sprintf("name %q", name), "NAME=VALUE with a non-empty NAME without '=', NUL or white space")
		case names[name]:
			v.add(k, fmt.Sprintf("name %q", name), "set twice; set each variable once")
		}
		names[name] = true
	}
	if ct.EnvFile != "" {
		v.path(key+".env_file", ct.EnvFile)
	}
	for i, kv := range ct.Labels {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.HasPrefix(name, "adoption.") {
			v.addf(key+".labels[%d]", kv, "KEY=VALUE with a non-empty KEY not starting with 'adoption.' (the mesh's own)", i)
		}
	}
	kept := map[string]bool{}
	for i, k := range ct.Keep {
		switch {
		case !EnvNameOK(k) || strings.HasPrefix(k, "adoption."):
			v.addf(key+".keep[%d]", k, "the name of an environment variable or a label (non-empty, no '=', NUL or white space, not starting with 'adoption.')", i)
		case kept[k]:
			v.addf(key+".keep[%d]", k, "listed twice", i)
		}
		kept[k] = true
	}
	for i, p := range ct.DropPorts {
		if _, err := ParsePort(p); err != nil {
			v.addf(key+".drop_ports[%d]", p, err.Error()+"; a host PORT/PROTO the predecessor publishes, e.g. 8443/tcp", i)
		}
	}
	seen := map[string]bool{}
	for i, r := range ct.Replaces {
		k := fmt.Sprintf("%s.replaces[%d]", key, i)
		switch {
		case !dockerName.MatchString(r) || strings.HasSuffix(r, ".next") || strings.HasSuffix(r, ".predecessor"):
			v.add(k, r, "a container name (letters, digits, _ . -) not ending in .next or .predecessor")
		case r == ct.Name:
			v.add(k, r, "is the module's own container name; replaces lists predecessors of other names")
		case seen[r]:
			v.add(k, r, "listed twice")
		}
		seen[r] = true
		for _, m := range all {
			if m.Name == module || m.Container == nil {
				continue
			}
			if m.Container.Name == r || slices.Contains(m.Container.Replaces, r) {
				v.add(k, r, "module "+m.Name+" also takes over this container; a predecessor has one successor")
			}
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
	v.duration(key+".timeout", h.Timeout)
}

// sortedKeys returns m's keys, sorted: the map's order never shows, so
// workflow code may call it (workflowcheck cannot see the sort).
//
//workflowcheck:ignore
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// witness checks flip.witness: an IP address or a DNS name to dial, and an
// IP address to dial from.
func (v *validator) witness(w Witness) {
	if _, err := w.Keys(); err != nil {
		v.add("flip.witness.key", w.Key.Text(), err.Error())
	}
	if w.Disabled && (w.Address != "" || w.From != "" || w.Netns != "" || len(w.Key) > 0) {
		v.add("flip.witness.disabled", "true", "false when flip.witness.address, from, netns or key is set: a witness named and disabled at once is a mistake; remove one")
	}
	if ns := w.Netns; ns != "" && (!path.IsAbs(ns) || path.Clean(ns) != ns) {
		v.add("flip.witness.netns", ns, "an absolute, clean path of a network namespace on the orchestrator's host, e.g. /run/netns/ops")
	}
	if a := w.Address; a != "" {
		if _, err := netip.ParseAddr(a); err != nil && !dnsName(a) {
			v.add("flip.witness.address", a, "an IP address or a DNS name of the node (no port, no scheme), as the operator reaches it, e.g. 203.0.113.7 or n1.example.net")
		}
	}
	if f := w.From; f != "" {
		if _, err := netip.ParseAddr(f); err != nil {
			v.add("flip.witness.from", f, "an IP address of the orchestrator's host to dial from, e.g. 10.8.0.2; leave it empty to let the route choose")
		}
	}
}

// dnsName reports whether s is a DNS name: labels of letters, digits and
// '-', not starting or ending with '-', joined by dots.
func dnsName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
