// Package containerenv reads a container's environment overrides on the
// node. The plan names each variable with the sha256 of its value; the
// value comes from the worker's own configuration, by that hash, or from
// the container's env_file under node.root. No value ever enters a
// workflow history: not in an input, not in a result, not in an error.
package containerenv

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/custody"
)

// ErrBadEnv is the error type of an unusable environment override.
const ErrBadEnv = "BadEnv"

// MaxFileSize is the largest env_file the agent reads: an environment
// is a few lines, and a bound keeps a mistaken path (a log, /dev/zero
// behind a link) from filling the agent's memory.
const MaxFileSize = 1 << 20

// Node is the node the environments are read on.
type Node struct {
	// Name is the node's name, as errors say it.
	Name string
	// Root is node.root: every env_file is read beneath it.
	Root string
}

// Module is the module's environment overrides: env_file's lines, then
// env's values over them. nil when the module sets none.
func (n Node) Module(auth *authority.Authority, m config.ModulePlan) (map[string]string, error) {
	return n.Container(auth, m.Container, fmt.Sprintf("modules[%s].container", m.Name))
}

// Container is Module for any container of the plan, named by key in
// errors.
func (n Node) Container(auth *authority.Authority, c *config.Container, key string) (map[string]string, error) {
	bad := func(format string, args ...any) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...)+"; nothing was changed", ErrBadEnv, nil)
	}
	var env map[string]string
	if c.EnvFile != "" {
		b, err := n.readUnderRoot(c.EnvFile)
		if err != nil {
			return nil, bad("%s.env_file = %s: %v; the file must be a regular file of at most %d bytes under node.root (%s) on node %s, with no symlink on its path", key, c.EnvFile, err, MaxFileSize, n.Root, n.Name)
		}
		env = map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for i := 1; sc.Scan(); i++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			if !ok || !config.EnvNameOK(name) {
				// The line may hold a secret: only its number is named.
				return nil, bad("%s.env_file = %s: line %d is not NAME=VALUE with a non-empty NAME without white space", key, c.EnvFile, i)
			}
			env[name] = v
		}
	}
	for name, sum := range c.EnvSHA256 {
		if !config.EnvNameOK(name) {
			return nil, bad("%s.env: variable name %q is empty or holds '=', NUL or white space", key, name)
		}
		v, ok := auth.Contents[sum]
		if !ok {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"%s.env.%s: the worker's configuration on node %s has no value with sha256 %.12s; update the node's configuration to the one the plan was sent from and restart adopt-worker",
				key, name, n.Name, sum), authority.ErrMissingContent, nil)
		}
		if env == nil {
			env = map[string]string{}
		}
		env[name] = string(v)
	}
	return env, nil
}

// readUnderRoot reads path (absolute, taken under node.root) held to
// custody's rules: beneath node.root with no symlink in any component, a
// regular file only (a FIFO is refused at once, not waited on), at most
// MaxFileSize bytes.
func (n Node) readUnderRoot(path string) ([]byte, error) {
	if n.Root == "" {
		return nil, fmt.Errorf("the worker has no node.root")
	}
	return custody.ReadFile(n.Root, path, MaxFileSize)
}
