// Package manpage writes a binary's manual pages from its own cobra
// commands (github.com/spf13/cobra/doc), so that the pages the packages
// install say what the binary they ship takes. Each binary adds Command as
// a hidden `man DIR`; scripts/deb.sh runs it at package build time.
package manpage

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"adoption/buildinfo"
)

// Command is the hidden `man DIR`: one page per command of the binary
// (section 1, the build's version as its source), into DIR. The date is
// $SOURCE_DATE_EPOCH's when set, so that a rebuild writes the same pages.
func Command() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the manual page of every command into DIR (for the packages)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			header := &doc.GenManHeader{Section: "1", Manual: "adoption", Source: "adoption " + buildinfo.Read().Version}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("manual pages into %s: %w", args[0], err)
			}
			return nil
		},
	}
}
