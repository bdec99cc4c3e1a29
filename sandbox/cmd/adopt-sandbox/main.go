// adopt-sandbox raises and removes sandbox nodes for the demo and the tests.
// It needs root: it creates network namespaces.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"adoption/buildinfo"
	"adoption/config"
	"adoption/internal/opkey"
	"adoption/sandbox"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "adopt-sandbox:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	r := &cobra.Command{Use: "adopt-sandbox", Version: buildinfo.Read().String(), SilenceUsage: true, SilenceErrors: true}
	r.SetVersionTemplate("adopt-sandbox {{.Version}}\n")
	var name, dir, temporal, planFile, codecKey, fleet string
	var index int
	var allow, allowOnly, closed []string
	spec := func() (sandbox.Spec, error) {
		self, _ := os.Executable()
		role := "member"
		if index == 1 {
			role = "control" // the first node is the control node, as on the reference node
		}
		s := sandbox.Spec{Name: name, Index: index, Dir: dir, Binary: self, Role: role, Files: DemoFiles(name), CodecKeyFile: codecKey, Fleet: fleet}
		for _, l := range []struct {
			in  []string
			out *[]config.Port
		}{{allow, &s.Allowed}, {allowOnly, &s.AllowedOnly}, {closed, &s.Closed}} {
			for _, p := range l.in {
				if p == "" {
					continue
				}
				port, err := config.ParsePort(p)
				if err != nil {
					return s, fmt.Errorf("port %q: %w", p, err)
				}
				*l.out = append(*l.out, port)
			}
		}
		return s, nil
	}
	var plain bool
	var services []string
	var image string
	var load []string
	up := &cobra.Command{
		Use:   "up",
		Short: "Raise a reference node (its own Docker engine, ufw, services, agent's management link) and write its configuration",
		RunE: func(cmd *cobra.Command, _ []string) error {
			sp, err := spec()
			if err != nil {
				return err
			}
			plan := DemoModules
			if planFile != "" {
				b, err := os.ReadFile(planFile)
				if err != nil {
					return err
				}
				plan = string(b)
			}
			if plain {
				n := sandbox.New(sp)
				if err := n.Up(); err != nil {
					return err
				}
				path, err := n.WriteConfig(temporal, plan)
				if err != nil {
					return err
				}
				fmt.Printf("sandbox node %s: namespace %s (%s), peer %s (%s), config %s\n", n.Name, n.Netns, n.Addr, n.Peer, n.PeerAddr, path)
				return nil
			}
			svcs, err := parseServices(services, image)
			if err != nil {
				return err
			}
			n := sandbox.NewRef(sandbox.RefSpec{Spec: sp, Services: svcs, Images: load, Temporal: temporal})
			start := time.Now()
			if err := n.Up(); err != nil {
				return err
			}
			path, err := n.WriteConfig(plan)
			if err != nil {
				return err
			}
			fmt.Printf("reference node %s up in %.1fs: namespace %s (%s, %s), clients in %s (%s, %s), engine %s, Temporal via %s, config %s\n",
				n.Name, time.Since(start).Seconds(), n.Netns, n.Addr, n.Addr6, n.Peer, n.PeerAddr, n.PeerAddr6, n.DockerHost(), n.TemporalAddr(), path)
			return nil
		},
	}
	up.Flags().StringVar(&planFile, "plan", "", "file with the plan part of the configuration (modules, foundation, flip...); default: a demo plan")
	up.Flags().StringSliceVar(&allow, "allow", []string{"22/tcp", "25/tcp"}, "host services ufw allows, each served by a listener on the node (IPv4 and IPv6)")
	up.Flags().StringSliceVar(&allowOnly, "allow-only", nil, "with --plain: ports the found firewall allows with no listener")
	up.Flags().StringSliceVar(&closed, "closed", []string{"8081/tcp"}, "host services listening on the node that ufw does not allow")
	up.Flags().StringSliceVar(&services, "service", []string{"mail:18025:8025/tcp", "web:18080:8080/tcp", "store:15432:5432/tcp", "metrics:19100:9100/tcp:unrouted"},
		"containers of the node's engine, NAME:HOSTPORT:CONTAINERPORT/PROTO[:unrouted]: published on HOSTPORT, routed by ufw unless unrouted, data in volume NAME-data")
	up.Flags().StringVar(&image, "image", "adoption-demo-svc:v1", "the services' image, moved from the host's engine (adopt-sandbox images builds it)")
	up.Flags().StringSliceVar(&load, "load", []string{"adoption-demo-svc:v2"}, "more local images to move into the node's engine (those modules migrate to)")
	up.Flags().BoolVar(&plain, "plain", false, "the old plain node: a namespace with an iptables-nft firewall and listeners, no engine, no ufw")
	down := &cobra.Command{
		Use:   "down",
		Short: "Remove a sandbox node's namespaces and listeners",
		RunE: func(cmd *cobra.Command, _ []string) error {
			sp, err := spec()
			if err != nil {
				return err
			}
			if err := sandbox.New(sp).Down(); err != nil {
				return err
			}
			return sandbox.NewRef(sandbox.RefSpec{Spec: sp}).Down()
		},
	}
	for _, c := range []*cobra.Command{up, down} {
		c.Flags().StringVar(&name, "name", "n1", "node name")
		c.Flags().IntVar(&index, "index", 1, "1-250: the sandbox's subnet 198.19.INDEX.0/30; 1 is the control node")
		c.Flags().StringVar(&dir, "dir", filepath.Join(".adoption", "sandbox", "n1"), "directory for the node's root, state and config")
		c.Flags().StringVar(&temporal, "temporal", "127.0.0.1:7233", "Temporal address written into the config")
		c.Flags().StringVar(&codecKey, "codec-key-file", "", "temporal.codec_key_file written into the config (payload encryption and keyed digests)")
		c.Flags().StringVar(&fleet, "fleet", "", "authority.fleet written into the config: the fleet whose workflow may read the node's plan")
	}
	serve := &cobra.Command{
		Use:    "serve PORT/PROTO...",
		Short:  "Serve listeners (run inside the namespace)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ps []config.Port
			for _, a := range args {
				p, err := config.ParsePort(a)
				if err != nil {
					return err
				}
				ps = append(ps, p)
			}
			return sandbox.Serve(name, ps, os.Stdout)
		},
	}
	serve.Flags().StringVar(&name, "name", "n1", "node name")
	var timeout time.Duration
	connect := &cobra.Command{
		Use:   "connect HOST:PORT",
		Short: "Try one TCP connection (run from the peer namespace): prints open, refused or filtered",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Println(sandbox.Connect(args[0], timeout))
			return nil
		},
	}
	connect.Flags().DurationVar(&timeout, "timeout", 500*time.Millisecond, "connect timeout")
	var every, dur time.Duration
	var overHTTP bool
	var path string
	hammer := &cobra.Command{
		Use:   "hammer HOST:PORT",
		Short: "Connect continuously (run from the peer namespace) and hold one connection: prints counts as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hammer := sandbox.Hammer
			if overHTTP {
				hammer = func(addr string, every, d time.Duration) (sandbox.HammerResult, error) {
					return sandbox.HammerHTTPPath(addr, path, every, d)
				}
			}
			r, err := hammer(args[0], every, dur)
			if err != nil {
				return err
			}
			return json.NewEncoder(os.Stdout).Encode(r)
		},
	}
	hammer.Flags().DurationVar(&every, "every", 5*time.Millisecond, "pause between connections")
	hammer.Flags().DurationVar(&dur, "for", 10*time.Second, "how long")
	hammer.Flags().StringVar(&path, "path", "/health", "with --http: the path each connection asks; answers other than /health's are counted by body")
	hammer.Flags().BoolVar(&overHTTP, "http", false, "the service speaks HTTP: each connection asks GET /health; the held one is a keep-alive connection asked again at the end")
	var clients int
	dnsHammer := &cobra.Command{
		Use:   "dnshammer HOST:PORT",
		Short: "Query a resolver continuously (run from the peer namespace), UDP and TCP, each query from a fresh socket: prints counts as JSON (and \"answered\" on stderr at the first answer)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			answered := func() { fmt.Fprintln(os.Stderr, "answered") }
			return json.NewEncoder(os.Stdout).Encode(sandbox.HammerDNS(args[0], clients, every, dur, answered))
		},
	}
	dnsHammer.Flags().DurationVar(&every, "every", 5*time.Millisecond, "pause between a client's queries")
	dnsHammer.Flags().DurationVar(&dur, "for", 10*time.Second, "how long")
	dnsHammer.Flags().IntVar(&clients, "clients", 4, "clients querying at once")
	get := &cobra.Command{
		Use:   "get URL",
		Short: "HTTP GET a URL and print the body (no curl needed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := http.Client{Timeout: 3 * time.Second}
			resp, err := c.Get(args[0])
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", args[0], resp.Status)
			}
			_, err = io.Copy(os.Stdout, resp.Body)
			return err
		},
	}
	var repo string
	images := &cobra.Command{
		Use:   "images",
		Short: "Build the stand-in service image (REPO:v1 and REPO:v2) into the local Docker engine (run from the module root)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sandbox.ServiceImages(cmd.Context(), ".", map[string]string{"v1": repo + ":v1", "v2": repo + ":v2"})
		},
	}
	images.Flags().StringVar(&repo, "repo", "adoption-demo-svc", "image repository name")
	var listen, to string
	relay := &cobra.Command{
		Use:    "relay",
		Short:  "Relay TCP from the management link to Temporal (started by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sandbox.Relay(listen, to, os.Stdout)
		},
	}
	relay.Flags().StringVar(&listen, "listen", "", "HOST:PORT to accept on")
	relay.Flags().StringVar(&to, "to", "", "HOST:PORT to relay to")
	operatorKey := &cobra.Command{
		Use:   "operator-key PATH",
		Short: "Write a new operator key (ed25519, 0600, PATH.pub beside it) for a sandbox run: nodes raised with " + sandbox.OperatorKeyEnv + "=PATH trust it and sign with it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			k, err := opkey.Generate(filepath.Dir(a[0]), filepath.Base(a[0]), "sandbox-operator")
			if err != nil {
				return err
			}
			fmt.Println(k.Public)
			return nil
		},
	}
	r.AddCommand(up, down, serve, connect, hammer, dnsHammer, get, images, relay, operatorKey)
	return r
}

// DemoFiles are the files a predecessor's configuration sync leaves: system
// files and one service's secret-bearing environment file.
func DemoFiles(node string) map[string]string {
	return map[string]string{
		"/etc/hosts": "127.0.0.1 localhost\n198.19.1.1 " + node + "\n",
		"/etc/ssh/sshd_config.d/predecessor.conf": "PasswordAuthentication no\n",
		"/etc/apt/apt.conf.d/50predecessor":       "APT::Periodic::Update-Package-Lists \"1\";\n",
		"/srv/mail/mail.env":                      "MAIL_RELAY_PASSWORD=demo-secret-not-for-history\n",
	}
}

// DemoModules is the plan part of the sandbox's configuration.
const DemoModules = `foundation:
  ports:
    registry: 5001/tcp
    broker_management: 15673/tcp
    store: 5432/tcp
modules:
  - name: mail
    ports: ["25/tcp"]
    files:
      - path: /srv/mail/mail.env
        mode: "0640"
        content: "MAIL_RELAY_PASSWORD=mesh-managed\n"
  - name: web
    ports: ["80/tcp", "443/tcp"]
node_files:
  - path: /etc/hosts
    content: "127.0.0.1 localhost\n"
  - path: /etc/ssh/sshd_config.d/predecessor.conf
    content: "PasswordAuthentication no\n"
  - path: /etc/apt/apt.conf.d/50predecessor
    content: ""
flip:
  drop: []
  confirm_timeout: 2m
`

// parseServices reads --service values NAME:HOSTPORT:CONTAINERPORT/PROTO[:unrouted]:
// the stand-in service listening on CONTAINERPORT with its data in NAME-data.
func parseServices(specs []string, image string) ([]sandbox.Service, error) {
	var out []sandbox.Service
	for _, s := range specs {
		if s == "" {
			continue
		}
		f := strings.Split(s, ":")
		if len(f) < 3 || len(f) > 4 || (len(f) == 4 && f[3] != "unrouted") {
			return nil, fmt.Errorf("--service %q: want NAME:HOSTPORT:CONTAINERPORT/PROTO[:unrouted], e.g. mail:18025:8025/tcp", s)
		}
		ctr, err := config.ParsePort(f[2])
		if err != nil {
			return nil, fmt.Errorf("--service %q: container port: %w", s, err)
		}
		host, err := config.ParsePort(f[1] + "/" + ctr.Proto)
		if err != nil {
			return nil, fmt.Errorf("--service %q: host port: %w", s, err)
		}
		if !config.ValidName(f[0]) {
			return nil, fmt.Errorf("--service %q: name must be %s", s, config.NameRule)
		}
		out = append(out, sandbox.Service{
			Name: f[0], Image: image, Host: host, Container: ctr, Routed: len(f) == 3,
			Cmd:     []string{"-listen", fmt.Sprintf(":%d", ctr.Num), "-data", "/named,/anon"},
			Volumes: []string{f[0] + "-data:/named"},
		})
	}
	return out, nil
}
