package tests

// End to end on the reference node: the predecessor's node as it really is (its
// own Docker engine in its namespace, ufw with the ufw-docker arrangement,
// services behind published ports), the agent on the node, the real CLI and
// dev server, and real packets from clients in the peer namespace.

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/activities"
	"adoption/firewall"
	"adoption/internal/wait"
	"adoption/sandbox"
	"adoption/workflows"
)

// openTo says whether the probe reports published port open on the forward
// path (IPv4, TCP) to a client at addr. An uncertain opening covering it is
// an error: the evaluator must decide.
func openTo(rep *activities.ProbeReport, port int, addr netip.Addr) (bool, error) {
	for _, o := range rep.Firewall.Open {
		end := int(o.PortEnd)
		if end == 0 {
			end = int(o.Port)
		}
		if o.Direction != firewall.HookForward || o.Family != firewall.FamilyIP || o.Proto != "tcp" || port < int(o.Port) || port > end {
			continue
		}
		if o.From != "" {
			src, err := netip.ParsePrefix(o.From)
			if err != nil {
				return false, fmt.Errorf("opening %+v: source %q is not a prefix", o, o.From)
			}
			if !src.Contains(addr) {
				continue
			}
		}
		if o.Uncertain {
			return false, fmt.Errorf("reported uncertain (%s): %+v", o.Reason, o)
		}
		return true, nil
	}
	return false, nil
}

// forwardOpen finds the forward opening through DNAT (not routed) of the ip
// family that covers port.
func forwardOpen(rep *activities.ProbeReport, port int) *firewall.Opening {
	for i, o := range rep.Firewall.Open {
		end := int(o.PortEnd)
		if end == 0 {
			end = int(o.Port)
		}
		if o.Direction == firewall.HookForward && !o.Routed() && o.Family == firewall.FamilyIP && o.Proto == "tcp" && int(o.Port) <= port && port <= end {
			return &rep.Firewall.Open[i]
		}
	}
	return nil
}

// TestReferenceNode: clients outside reach the routed published ports
// through DNAT and the node's forward hook, not the unrouted one; host
// services answer on IPv4 and IPv6 as ufw says; the agent's probe, run on
// the node, lists the node engine's containers through docker.host, names
// the published host ports open and the unrouted one closed, and names an
// engine it cannot reach instead of reporting no containers.
func TestReferenceNode(t *testing.T) {
	needE2E(t)
	r := upRefNode(t, "refprobe", 160, nil, []sandbox.Service{
		refService("mail", 18025, 8025, true),
		refService("web", 18080, 8080, true),
		refService("store", 15432, 5432, true),
		refService("metrics", 19100, 9100, false),
		// Source-restricted: routed from the clients' own address only
		// (the peer is 198.19.INDEX.2), and from a range they are not in.
		refServiceFrom("admin", 18090, 9090, "198.19.160.2/32"),
		refServiceFrom("backup", 18091, 9091, "192.0.2.0/24"),
	}, "modules: []\n")

	t.Run("clients", func(t *testing.T) {
		for port, want := range map[int]string{18025: "open", 18080: "open", 15432: "open", 19100: "filtered"} {
			if got := r.dial(t, r.Addr, port); got != want {
				t.Errorf("a client's connection to published port %d: %s, want %s", port, got, want)
			}
		}
		if got := r.get(t, 18025, "/version"); got != "v1" {
			t.Errorf("mail through DNAT answers %q, want v1", got)
		}
		for _, addr := range []string{r.Addr, r.Addr6} {
			if got := r.dial(t, addr, 22); got != "open" {
				t.Errorf("host service 22/tcp on %s: %s, want open", addr, got)
			}
			if got := r.dial(t, addr, 8081); got != "filtered" {
				t.Errorf("host service 8081/tcp (not allowed by ufw) on %s: %s, want filtered", addr, got)
			}
		}
		nat := r.onNodeOut(t, "iptables", "-t", "nat", "-S", "DOCKER")
		if !strings.Contains(nat, "--dport 18025 -j DNAT --to-destination 172.17.") {
			t.Errorf("the node's engine does not DNAT 18025 in the node's own nat table:\n%s", nat)
		}
	})

	t.Run("probe lists the node engine's containers", func(t *testing.T) {
		rep, _ := probeOnNode(t, r)
		if !rep.Containers.Available {
			t.Fatalf("the probe on the node did not reach the node's engine: %s", rep.Containers.Error)
		}
		published := map[string]uint16{}
		for _, c := range rep.Containers.Containers {
			for _, p := range c.Ports {
				published[c.Name] = p.HostPort
			}
		}
		for name, port := range map[string]uint16{"mail": 18025, "web": 18080, "store": 15432, "metrics": 19100} {
			if published[name] != port {
				t.Errorf("container %s: published %d, want %d (containers %+v)", name, published[name], port, rep.Containers.Containers)
			}
		}
	})

	// The evaluator's part: opens as clients see them.
	t.Run("probe names published host ports", func(t *testing.T) {
		rep, raw := probeOnNode(t, r)
		for _, port := range []int{18025, 18080, 15432} {
			o := forwardOpen(rep, port)
			if o == nil || o.Uncertain {
				t.Errorf("published port %d/tcp: opening %+v, want open (forward, not uncertain)", port, o)
			}
		}
		// The service behind each: the container holding the DNAT target.
		for port, name := range map[int]string{18025: "mail", 18080: "web", 15432: "store"} {
			if o := forwardOpen(rep, port); o != nil && rep.Behind[o.Via] != name {
				t.Errorf("published port %d/tcp -> %s: the probe names container %q behind it, want %s", port, o.Via, rep.Behind[o.Via], name)
			}
		}
		// Unrouted: closed to the public (the clients'); ufw-docker still
		// lets the private ranges in, and the probe says so by source.
		for _, o := range rep.Firewall.Open {
			if o.Direction == firewall.HookForward && o.Port == 19100 && o.Proto == "tcp" && !privateSource(o.From) {
				t.Errorf("published but unrouted 19100/tcp is reported open to %q: %+v", o.From, o)
			}
		}
		for _, port := range []int{8025, 8080, 5432} {
			if o := forwardOpen(rep, port); o != nil && int(o.Port) == port && o.PortEnd == 0 {
				t.Errorf("the probe reports container port %d/tcp as if clients used it: %+v", port, o)
			}
		}
		if t.Failed() {
			t.Logf("probe:\n%s", raw)
		}
	})

	// What the evaluator says a client at the peer's address can reach is
	// what that client's packets show, published port by published port:
	// open, closed and source-restricted both ways.
	t.Run("evaluator equals packets", func(t *testing.T) {
		rep, raw := probeOnNode(t, r)
		peer := netip.MustParseAddr(r.PeerAddr)
		for _, port := range []int{18025, 18080, 15432, 19100, 18090, 18091} {
			says, err := openTo(rep, port, peer)
			if err != nil {
				t.Errorf("published port %d/tcp: %v", port, err)
				continue
			}
			got := r.dial(t, r.Addr, port)
			if (got == "open") != says {
				t.Errorf("published port %d/tcp: the evaluator says open to %s: %v; a client there sees %s", port, peer, says, got)
			}
		}
		if got := r.dial(t, r.Addr, 18090); got != "open" {
			t.Errorf("18090, routed from the client's own address: %s, want open", got)
		}
		if got := r.dial(t, r.Addr, 18091); got != "filtered" {
			t.Errorf("18091, routed from 192.0.2.0/24 only: %s, want filtered", got)
		}
		if t.Failed() {
			t.Logf("probe:\n%s", raw)
		}
	})

	t.Run("unreachable engine is named", func(t *testing.T) {
		sock := "unix://" + filepath.Join(r.RunDir, "no-such-engine.sock")
		rep, _ := probeOnNode(t, r, "ADOPT_DOCKER_HOST="+sock)
		if rep.Containers.Available || !strings.Contains(rep.Containers.Error, sock) {
			t.Fatalf("an unreachable engine must be named, not read as no containers: %+v", rep.Containers)
		}
		cmd := r.OnNode(filepath.Join(bin, "adopt-worker"), "probe", "--config", r.cfg)
		cmd.Env = append(cmd.Env, "ADOPT_DOCKER_HOST="+sock)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "containers: UNKNOWN (docker engine unavailable at "+sock) {
			t.Fatalf("probe text does not name the unreachable engine: %v\n%s", err, out)
		}
	})
}

func (r *refNode) onNodeOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := r.OnNode(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s on the node: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

const refPlan = `modules:
  - name: mail
    ports: ["18025/tcp"]
    container:
      name: mail
      image: ` + svcV2 + `
      cmd: ["-listen", ":8025", "-data", "/named,/anon"]
      ports: {"18025/tcp": "8025/tcp"}
    health:
      http: http://127.0.0.1:18025/health
      timeout: 15s
  - name: shop
    ports: ["18443/tcp"]
    container:
      name: shop
      image: ` + svcV2 + `
      cmd: ["-listen", ":8443", "-data", "/named,/anon"]
      ports: {"18443/tcp": "8443/tcp"}
    health:
      http: http://127.0.0.1:18443/health
      timeout: 15s
node_files:
  - path: /etc/hosts
    content: "127.0.0.1 localhost\n"
flip:
  drop: []
  confirm_timeout: 1m
cutover:
  stop_timeout: 2s
firewall:
  reconcile_interval: 5s
`

// TestReferenceNodeAdoption: the agent on the node adopts it; a takeover
// module keeps its data and its clients; a new service's published port
// answers clients while adopted; the preview refuses naming an undeclared
// published port by its host port and approves once it is dropped; the
// flip runs under continuous client load on every declared published port
// with a held connection: none fails, the held one survives, the dropped
// port closes, Docker's own chains still DNAT.
func TestReferenceNodeAdoption(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	r := upRefNode(t, "refadopt", 161, srv, []sandbox.Service{
		refService("mail", 18025, 8025, true),
		refService("web", 18080, 8080, true),
		refService("metrics", 19100, 9100, false),
	}, refPlan)
	// An IPv6 host service: ufw allows 8081/tcp (served on the node on
	// both families) from IPv6 sources only, as found before adoption.
	if out, err := exec.Command("ip", "netns", "exec", r.Netns, "ufw", "allow", "proto", "tcp", "from", "::/0", "to", "any", "port", "8081").CombinedOutput(); err != nil {
		t.Fatalf("ufw allow 8081/tcp from IPv6: %v: %s", err, out)
	}
	for addr, want := range map[string]string{r.Addr6: "open", r.Addr: "filtered"} {
		if got := r.dial(t, addr, 8081); got != want {
			t.Fatalf("host service 8081/tcp on %s before adoption: %s, want %s", addr, got, want)
		}
	}
	rep, _ := probeOnNode(t, r)
	v6, v4 := false, false
	for _, o := range rep.Firewall.Open {
		if o.Direction != firewall.HookInput || o.Proto != "tcp" || o.Port > 8081 || max(o.Port, o.PortEnd) < 8081 {
			continue
		}
		if o.Uncertain {
			t.Errorf("the probe calls host port 8081/tcp uncertain: %+v", o)
		}
		v6 = v6 || (o.Family == firewall.FamilyIP6 && o.From == "")
		v4 = v4 || o.Family == firewall.FamilyIP
	}
	if !v6 || v4 {
		t.Errorf("the probe should name host port 8081/tcp open on IPv6 to anyone and closed on IPv4: ip6 %v, ip %v", v6, v4)
	}
	startAgent(t, r)
	n := r.node

	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt start: %s", errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)

	// A takeover: the predecessor's mail becomes the module's, data kept,
	// clients served through the same published port.
	sums := r.get(t, 18025, "/sums")
	if _, errs, code := adopt(t, "migrate", n.Name, "mail", "--config", n.cfg); code != 0 {
		t.Fatalf("migrate mail: %s", errs)
	}
	waitFor(t, n, "mail to migrate", func(st workflows.State) bool { return moduleState(st, "mail") == workflows.ModuleMigrated })
	if got := r.get(t, 18025, "/version"); got != "v2" {
		t.Fatalf("clients of mail get %q after the takeover, want v2", got)
	}
	if got := r.get(t, 18025, "/sums"); got != sums {
		t.Fatalf("mail's data changed in the takeover:\n%s\nwant\n%s", got, sums)
	}
	if ps := r.engine(t, "ps", "-a", "--format", "{{.Names}} {{.State}}", "--filter", "name=mail"); !strings.Contains(ps, "mail running") || !strings.Contains(ps, "mail.predecessor exited") {
		t.Fatalf("the node's engine should run mail and keep mail.predecessor stopped: %q", ps)
	}

	// A new service: started in the node's engine, published; clients
	// reach it while adopted only if its mark is on the forward path.
	if _, errs, code := adopt(t, "migrate", n.Name, "shop", "--config", n.cfg); code != 0 {
		t.Fatalf("migrate shop: %s", errs)
	}
	waitFor(t, n, "shop to migrate", func(st workflows.State) bool { return moduleState(st, "shop") == workflows.ModuleMigrated })
	if ps := r.engine(t, "ps", "--format", "{{.Names}} {{.Ports}}", "--filter", "name=shop"); !strings.Contains(ps, "18443->8443/tcp") {
		t.Fatalf("shop is not published by the node's engine: %q", ps)
	}
	if got := r.dial(t, r.Addr, 18443); got != "open" {
		t.Errorf("clients cannot reach the new service shop on 18443 while adopted: %s (its mark must be on the forward path)", got)
	}

	// The marks are written as iptables writes them: the operator's own
	// tools still read the whole found firewall.
	for _, cmd := range [][]string{{"iptables", "-S"}, {"ip6tables", "-S"}, {"iptables-save"}, {"ip6tables-save"}, {"ufw", "status", "verbose"}} {
		if out, err := r.OnNode(cmd...).CombinedOutput(); err != nil || strings.Contains(string(out), "incompatible") {
			t.Errorf("%s on the adopted node: %v\n%s", strings.Join(cmd, " "), err, out)
		}
	}

	// Someone deletes shop's forward-path marks by hand (or ufw reloads):
	// clients lose it until reconcile puts them back. Reconcile runs every
	// 5 s, so it may put them back before the first dial: what proves its
	// work is its event naming shop's mark, recorded after the deletion.
	deletedAt := time.Now()
	deleted := 0
	for ipt, chain := range map[string]string{"iptables": "ufw-user-forward", "ip6tables": "ufw6-user-forward"} {
		for _, line := range strings.Split(r.onNodeOut(t, ipt, "-S", chain), "\n") {
			if strings.HasPrefix(line, "-A ") && strings.Contains(line, ":shop:18443/tcp") {
				// iptables -S quotes the comment as a shell would read it.
				r.onNodeOut(t, "sh", "-c", ipt+" -D "+strings.TrimPrefix(line, "-A "))
				deleted++
			}
		}
	}
	if deleted == 0 {
		t.Fatalf("no forward-path mark of shop in ufw-user-forward:\n%s", r.onNodeOut(t, "iptables", "-S", "ufw-user-forward"))
	}
	closedSeen := r.dial(t, r.Addr, 18443) != "open"
	wait.Until(t, 60*time.Second, "reconcile to put shop's forward-path marks back (18443 open from the peer)", func() (bool, string) {
		if r.dial(t, r.Addr, 18443) == "open" {
			return true, ""
		}
		return false, r.onNodeOut(t, "iptables", "-S", "ufw-user-forward")
	})
	wait.Until(t, 15*time.Second, fmt.Sprintf("status to say reconcile put shop's forward mark back after it was deleted (closed in between: %v)", closedSeen), func() (bool, string) {
		st, err := status(t, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range st.Events {
			if !e.At.Before(deletedAt) && strings.Contains(e.Text, "put back") && strings.Contains(e.Text, "shop:18443/tcp") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(st.Events))
	})
	t.Logf("shop's forward marks deleted, closed to clients in between: %v; put back by reconcile", closedSeen)

	// The preview: web's published port is open and undeclared.
	out, errs, _ := adopt(t, "preview", n.Name, "--config", n.cfg)
	if !strings.Contains(out, "REFUSED") {
		t.Fatalf("preview should refuse: web's 18080 is open and undeclared:\n%s%s", out, errs)
	}
	named18080 := false
	for _, reason := range previewReasons(t, n) {
		if strings.HasPrefix(reason, "18080/tcp") {
			named18080 = true
		}
		for _, p := range []string{"18025/tcp", "18443/tcp", "8025/tcp", "8080/tcp", "68/udp"} {
			if strings.HasPrefix(reason, p) {
				t.Errorf("the preview names %s, which is declared, a container port or an essential: %s", p, reason)
			}
		}
	}
	if !named18080 {
		t.Errorf("the preview does not name the undeclared published port 18080/tcp by its host port: %v", previewReasons(t, n))
	}
	named8081 := false
	for _, reason := range previewReasons(t, n) {
		named8081 = named8081 || strings.HasPrefix(reason, "8081/tcp (input, ip6) is open now and would close")
		if strings.HasPrefix(reason, "8081/tcp (input, ip)") {
			t.Errorf("the preview names 8081/tcp on IPv4, where it is closed: %s", reason)
		}
	}
	if !named8081 {
		t.Errorf("the preview does not name the undeclared IPv6 host service 8081/tcp: %v", previewReasons(t, n))
	}
	// 19100 is not routed by ufw, but ufw-docker lets private sources reach
	// every published port: the preview names it too (from the private
	// ranges), so it is dropped on purpose as well.
	// 8443 and 9100 are the containers' own ports, which ufw-docker lets
	// private sources reach routed (not through DNAT): the mesh's table
	// does not carry that, so they close and are named.
	setFlipDrop(t, n.cfg, `"18080/tcp", "19100/tcp", "8081/tcp", "8443/tcp", "9100/tcp"`)
	out, errs, _ = adopt(t, "preview", n.Name, "--config", n.cfg)
	if !strings.Contains(out, "APPROVED") {
		t.Fatalf("with 18080/tcp, 19100/tcp and 8081/tcp dropped the preview should approve:\n%s%s", out, errs)
	}

	// The flip, under load on every declared published port.
	// The published ports over HTTP (keep-alive held), and the management
	// port 22 over IPv6, a host service (a plain TCP connection held).
	type load struct {
		addr string
		port int
		cmd  *exec.Cmd
		out  strings.Builder
	}
	var loads []*load
	for _, l := range []*load{{addr: r.Addr, port: 18025}, {addr: r.Addr, port: 18443}, {addr: "[" + r.Addr6 + "]", port: 22}} {
		args := []string{"hammer", "--http", fmt.Sprintf("%s:%d", l.addr, l.port), "--every", "5ms", "--for", "12s"}
		if l.port == 22 {
			args = append(args[:1], args[2:]...)
		}
		l.cmd = r.InPeer(append([]string{filepath.Join(bin, "adopt-sandbox")}, args...)...)
		l.cmd.Stdout, l.cmd.Stderr = &l.out, &l.out
		if err := l.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		loads = append(loads, l)
	}
	// Docker's own chains, to compare after converged: the flip and the
	// commit must leave them exactly as they are.
	dockerChains := func() string {
		return r.onNodeOut(t, "iptables", "-S", "DOCKER") + r.onNodeOut(t, "iptables", "-t", "nat", "-S")
	}
	dockerBefore := dockerChains()
	for _, l := range loads {
		answered(t, r.Peer, l.port, l.cmd.Process.Pid)
	}
	loadStart := time.Now()
	if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("flip: %s%s", out, errs)
	}
	waitPhase(t, n, workflows.PhaseConverged, 120*time.Second)
	// The loads must have run across the flip, not beside it.
	if st, err := status(t, n); err != nil || st.Flip == nil {
		t.Errorf("status after the flip: %+v, %v", st, err)
	} else if flipped := flippedAt(st); flipped.IsZero() || flipped.Before(loadStart) || flipped.After(loadStart.Add(11*time.Second)) {
		t.Errorf("the flip at %v did not fall inside the clients' load (from %v for 12 s): the test proves nothing about it", flipped, loadStart)
	}
	for _, l := range loads {
		if err := l.cmd.Wait(); err != nil {
			t.Fatalf("hammer %s:%d: %v %s", l.addr, l.port, err, l.out.String())
		}
		var h sandbox.HammerResult
		if err := json.Unmarshal([]byte(l.out.String()), &h); err != nil {
			t.Fatalf("hammer %s:%d output %q: %v", l.addr, l.port, l.out.String(), err)
		}
		t.Logf("flip under load, %s:%d: %d connections ok, %d refused, %d timed out; held connection alive: %v", l.addr, l.port, h.OK, h.Refused, h.TimedOut, h.Held)
		// At 5 ms between connections, 12 s is over a thousand: a few
		// hundred at least, or the load was not there.
		if h.OK < 200 || h.Refused != 0 || h.TimedOut != 0 || !h.Held {
			t.Errorf("the flip disturbed clients of %s:%d: %+v", l.addr, l.port, h)
		}
	}
	for port, want := range map[int]string{18025: "open", 18443: "open", 18080: "filtered", 19100: "filtered"} {
		if got := r.dial(t, r.Addr, port); got != want {
			t.Errorf("after the flip, published port %d: %s, want %s", port, got, want)
		}
	}
	for _, addr := range []string{r.Addr, r.Addr6} {
		if got := r.dial(t, addr, 22); got != "open" {
			t.Errorf("after the flip, management port 22 on %s: %s", addr, got)
		}
		if got := r.dial(t, addr, 8081); got != "filtered" {
			t.Errorf("after the flip, the dropped host service 8081/tcp on %s: %s, want filtered", addr, got)
		}
	}
	// Converged: nothing of ufw's decides any more, on either path.
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if save := r.onNodeOut(t, ipt+"-save"); strings.Contains(save, "ufw") || strings.Contains(save, "adoption:") {
			t.Errorf("%s-save after converged still holds ufw's chains or marks:\n%s", ipt, save)
		}
	}
	if got := dockerChains(); got != dockerBefore {
		t.Errorf("Docker's chains changed across the flip and commit:\nbefore:\n%s\nafter:\n%s", dockerBefore, got)
	}
	nat := r.onNodeOut(t, "iptables", "-t", "nat", "-S", "DOCKER")
	if !strings.Contains(nat, "--dport 18025 -j DNAT") || !strings.Contains(nat, "--dport 18443 -j DNAT") {
		t.Errorf("Docker's own chains no longer DNAT after the flip:\n%s", nat)
	}
}

// privateSource says whether an opening's source is one of the private
// ranges ufw-docker lets reach every published port.
func privateSource(from string) bool {
	switch from {
	case "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16":
		return true
	}
	return false
}

// flippedAt is when the workflow recorded the flip applied on the node
// (its "flipped (ID): ..." event: confirming by the deadline, or, in one
// round trip, applied, confirmed and committed), zero if it did not.
func flippedAt(st workflows.State) time.Time {
	for _, e := range st.Events {
		if strings.HasPrefix(e.Text, "flipped (") {
			return e.At
		}
	}
	return time.Time{}
}
