// This file decides adopt-worker's exit status, so that its units can tell
// a mistake that a restart will not fix from a failure that it may:
// a bad flag or argument exits 64 and a bad configuration 78 (sysexits'
// EX_USAGE and EX_CONFIG; the units list both in RestartPreventExitStatus=),
// anything else 1. Go's own panic exits 2, which must stay restartable.
package main

import (
	"errors"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"adoption/config"
	"adoption/output"
)

const (
	exitFailure = 1
	exitUsage   = 64
	exitConfig  = 78
)

type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// loadConfig is config.LoadWith with its errors marked as configuration
// errors.
func loadConfig(path string, extra map[string]string) (*config.Config, error) {
	cfg, err := config.LoadWith(path, extra)
	if err != nil {
		return nil, configError{err}
	}
	return cfg, nil
}

// loadNodeConfig is loadConfig for the commands that act as a node. No
// file given (--config, $ADOPT_CONFIG) and no node named in the
// environment is "no configuration given", with the flag and the file to
// try, rather than the first key an empty configuration lacks.
func loadNodeConfig(path string) (*config.Config, error) {
	if !config.Given(path) && os.Getenv(config.EnvVar("node.name")) == "" {
		return nil, configError{errors.New(config.NoConfiguration(config.NodeFile))}
	}
	return loadConfig(path, nil)
}

// exitCodes is the one table of what each exit status means, as every
// --help prints it.
var exitCodes = []output.ExitCode{
	{Code: 0, Meaning: "done"},
	{Code: exitFailure, Meaning: "failure: a restart may help (Temporal gone after it answered, a step that failed)"},
	{Code: exitUsage, Meaning: "usage: a bad flag or argument"},
	{Code: exitConfig, Meaning: "configuration: a bad or missing file, Temporal TLS files, codec key, credentials\n" +
		"refused; a restart cannot fix it (the units' RestartPreventExitStatus=64 78)"},
}

// exitCodesHelp is exitCodes as --help prints it.
var exitCodesHelp = output.ExitCodesHelp(exitCodes)

// withExitCodes ends the help of c and every command under it with the
// exit codes.
func withExitCodes(c *cobra.Command) {
	long := c.Long
	if long == "" {
		long = c.Short
	}
	c.Long = long + "\n\n" + exitCodesHelp
	for _, sub := range c.Commands() {
		withExitCodes(sub)
	}
}

// exitStatus is the status err exits with.
func exitStatus(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.As(err, new(usageError)), strings.HasPrefix(err.Error(), "unknown command "):
		return exitUsage
	case errors.As(err, new(configError)):
		return exitConfig
	}
	return exitFailure
}

// markUsage makes every flag and argument error of root and its commands a
// usage error.
func markUsage(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, c := range root.Commands() {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError{err}
				}
				return nil
			}
		}
		markUsage(c)
	}
}
