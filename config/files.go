// This file holds where the configuration files are, so that a message
// names the one that exists where the operator is: the packages' paths on
// an installed host (/etc/adoption/...), the source tree's otherwise.
package config

import (
	"os"
	"path/filepath"
)

// The files the packages' units read.
const (
	DefaultNodeFile         = "/etc/adoption/node.yaml"
	DefaultOrchestratorFile = "/etc/adoption/orchestrator.yaml"
)

// Kinds of file, for Example and NoConfiguration.
const (
	NodeFile         = "node"
	OrchestratorFile = "orchestrator"
	FleetFile        = "fleet"
)

// examples are where each kind's commented example may be, first found
// first: installed (by the packages or make install), in the source tree.
var examples = map[string][]string{
	NodeFile:         {"/etc/adoption/node.example.yaml", "config/node.example.yaml"},
	OrchestratorFile: {"/etc/adoption/orchestrator.example.yaml", "config/orchestrator.example.yaml"},
	FleetFile:        {"/etc/adoption/fleet.example.yaml", "config/fleet.example.yaml"},
}

// exists is os.Stat, replaced in tests.
var exists = func(p string) bool { _, err := os.Stat(p); return err == nil }

// Example is the path of kind's commented example where the operator is:
// the first that exists, else the source tree's (named as such).
func Example(kind string) string {
	paths := examples[kind]
	for _, p := range paths {
		if exists(p) {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
			return p
		}
	}
	return paths[len(paths)-1] + " (in adoption's source tree)"
}

// Given says whether a configuration file was named: path (--config), else
// $ADOPT_CONFIG.
func Given(path string) bool { return path != "" || os.Getenv("ADOPT_CONFIG") != "" }

// NoConfiguration is what a command that needs a node's file says when
// none was given (Given): the flag, the file to try and the example.
func NoConfiguration(kind string) string {
	def := DefaultNodeFile
	if kind == OrchestratorFile {
		def = DefaultOrchestratorFile
	}
	try := "the packages' is " + def + ", not present here"
	if exists(def) {
		try = "try --config " + def + ", which exists"
	}
	return "no configuration given: pass the " + kind + "'s configuration with --config FILE (or set ADOPT_CONFIG); " +
		try + "; " + Example(kind) + " is the commented reference"
}
