// Writing a briefing where the operator asked: stdout, or a file of its own
// (0600: a briefing names the node's ports, containers and paths), as
// Markdown or as the standalone HTML page. Both CLIs (adopt brief and
// adopt-worker brief) write through it.
package briefing

import (
	"fmt"
	"io"
	"os"
)

// Write renders b to stdout, or to the file out when it is set.
func Write(stdout io.Writer, out string, asHTML bool, b Brief) error {
	w := stdout
	if out != "" {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("--out %s: %w", out, err)
		}
		defer f.Close()
		w = f
	}
	render := Markdown
	if asHTML {
		render = HTML
	}
	return render(w, b)
}
