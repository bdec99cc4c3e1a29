// This file holds the settings for operating a process rather than
// migrating a node: where it serves its metrics and how it logs. They never
// enter the plan (nor its hash): two nodes may differ in them freely.
package config

import (
	"net"
	"strconv"
	"strings"

	"adoption/logging"
)

// Metrics says where the process serves Prometheus text at /metrics.
type Metrics struct {
	// Listen is HOST:PORT (e.g. 127.0.0.1:9464); empty serves no metrics.
	Listen string `mapstructure:"listen" json:"listen,omitempty"`
}

// Log says how the process writes its log lines (to stderr).
type Log struct {
	// Format is text (the default) or json.
	Format string `mapstructure:"format" json:"format"`
	// Level is the lowest level written: debug, info (the default), warn
	// or error.
	Level string `mapstructure:"level" json:"level"`
}

// LogFormats are the accepted values of log.format.
var LogFormats = []string{"text", "json"}

func (v *validator) operate(m Metrics, l Log) {
	if m.Listen != "" {
		host, port, err := net.SplitHostPort(m.Listen)
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil || perr != nil || n < 0 || n > 65535:
			v.add("metrics.listen", m.Listen, "HOST:PORT to serve /metrics on, e.g. 127.0.0.1:9464 (port 0-65535), or empty for no metrics")
		case host != "" && host != "localhost" && net.ParseIP(host) == nil:
			v.add("metrics.listen", m.Listen, "the host must be an IP address, localhost or empty (every address), e.g. 127.0.0.1:9464")
		}
	}
	if l.Format != "text" && l.Format != "json" {
		v.add("log.format", l.Format, "either text or json (set it in the file or ADOPT_LOG_FORMAT)")
	}
	if _, err := logging.ParseLevel(l.Level); err != nil {
		v.add(logging.LevelKey, l.Level, "one of "+strings.Join(logging.Levels, ", ")+" (set it in the file or ADOPT_LOG_LEVEL)")
	}
}

// OrchestratorDefaults are the settings the orchestrator loads its file
// with: it is no node and acts on no request, so a file holding only
// temporal.*, metrics.* and log.* is complete.
func OrchestratorDefaults() map[string]string {
	return map[string]string{"node.name": "orchestrator", "authority.unsigned": "true"}
}
