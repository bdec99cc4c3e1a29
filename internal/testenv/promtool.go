// promtool's lint of a /metrics exposition, for the tests that scrape one.
package testenv

import (
	"fmt"
	"os/exec"
	"strings"
)

// PromtoolCheckMetrics runs `promtool check metrics` on an exposition: nil
// when promtool finds nothing to say, else an error with what it said.
func PromtoolCheckMetrics(exposition string) (string, error) {
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("promtool check metrics: %w", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return s, fmt.Errorf("promtool check metrics complained")
	}
	return "", nil
}
