// adopt-sandbox raises and removes sandbox nodes for the demo and the tests.
// It needs root: it creates network namespaces.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"adoption/config"
	"adoption/sandbox"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "adopt-sandbox:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	r := &cobra.Command{Use: "adopt-sandbox", SilenceUsage: true, SilenceErrors: true}
	var name, dir, temporal string
	var index int
	spec := func() sandbox.Spec {
		self, _ := os.Executable()
		role := "member"
		if index == 1 {
			role = "control" // the first node is the control node, as in the seed
		}
		return sandbox.Spec{Name: name, Index: index, Dir: dir, Binary: self, Role: role,
			Allowed: ports("22/tcp", "80/tcp", "443/tcp", "25/tcp", "53/udp"),
			Closed:  ports("8081/tcp"),
			Files:   DemoFiles(name),
		}
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Raise a sandbox node and write its configuration",
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := sandbox.New(spec())
			if err := n.Up(); err != nil {
				return err
			}
			path, err := n.WriteConfig(temporal, DemoModules)
			if err != nil {
				return err
			}
			fmt.Printf("sandbox node %s: namespace %s (%s), peer %s (%s), config %s\n", n.Name, n.Netns, n.Addr, n.Peer, n.PeerAddr, path)
			return nil
		},
	}
	down := &cobra.Command{
		Use:   "down",
		Short: "Remove a sandbox node's namespaces and listeners",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sandbox.New(spec()).Down()
		},
	}
	for _, c := range []*cobra.Command{up, down} {
		c.Flags().StringVar(&name, "name", "n1", "node name")
		c.Flags().IntVar(&index, "index", 1, "1-250: the sandbox's subnet 198.19.INDEX.0/30; 1 is the control node")
		c.Flags().StringVar(&dir, "dir", filepath.Join(".adoption", "sandbox", "n1"), "directory for the node's root, state and config")
		c.Flags().StringVar(&temporal, "temporal", "127.0.0.1:7233", "Temporal address written into the config")
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
	hammer := &cobra.Command{
		Use:   "hammer HOST:PORT",
		Short: "Connect continuously (run from the peer namespace) and hold one connection: prints counts as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := sandbox.Hammer(args[0], every, dur)
			if err != nil {
				return err
			}
			return json.NewEncoder(os.Stdout).Encode(r)
		},
	}
	hammer.Flags().DurationVar(&every, "every", 5*time.Millisecond, "pause between connections")
	hammer.Flags().DurationVar(&dur, "for", 10*time.Second, "how long")
	r.AddCommand(up, down, serve, connect, hammer)
	return r
}

func ports(specs ...string) []config.Port { return config.MustPorts(specs) }

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
