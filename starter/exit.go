// Exit codes: one table, which --help prints and JSON errors name, and the
// errors that carry them.
package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"adoption/output"
)

// Exit codes, as Temporal users expect them; their meanings are exitCodes.
const (
	exitOK      = 0
	exitError   = 1
	exitRefused = 2
	exitUsage   = 3
)

// exitCodes is the one table of what each exit code means: exitCodesHelp
// prints it, and kind is the "kind" of a JSON error.
var exitCodes = []struct {
	code    int
	kind    string
	meaning string
}{
	{exitOK, "ok", "done (a request is done or accepted, as printed)"},
	{exitError, "error", "error: not delivered, Temporal unreachable, timed out, a request that failed\n" +
		"once accepted (a preview whose node did not answer), a wait that ended on a failure"},
	{exitRefused, "refused", "refused: the node's (or the fleet's) workflow refused the request, or the\n" +
		"preview refused the flip"},
	{exitUsage, "usage", "usage: a bad flag, argument or value; nothing was sent"},
}

// exitCodesHelp is exitCodes as the commands' --help prints it.
var exitCodesHelp = func() string {
	rows := make([]output.ExitCode, len(exitCodes))
	for i, e := range exitCodes {
		rows[i] = output.ExitCode{Code: e.code, Meaning: e.meaning}
	}
	return output.ExitCodesHelp(rows)
}()

// exitError is an error with its exit code and, for a refusal, its reasons.
type exitErr struct {
	code    int
	err     error
	reasons []string
	// shown: the command already printed the outcome (a refused preview
	// prints the preview itself); only the exit code remains.
	shown bool
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// refused is a refusal by the node's workflow (or a preview), with reasons.
func refused(err error, reasons []string) error {
	return &exitErr{code: exitRefused, err: err, reasons: reasons}
}

// shownRefusal is a refusal whose output the command has already printed.
func shownRefusal(err error, reasons []string) error {
	return &exitErr{code: exitRefused, err: err, reasons: reasons, shown: true}
}

func alreadyShown(err error) bool {
	var e *exitErr
	return errors.As(err, &e) && e.shown
}

// exitCode is err's exit code: an *exitErr carries its own; every other
// error is exitError. Usage errors are typed where they are found: usagef,
// cobra's flag errors (SetFlagErrorFunc) and argument checks (args).
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitErr
	if errors.As(err, &e) {
		return e.code
	}
	return exitError
}

// exitKind is code's kind in exitCodes.
func exitKind(code int) string {
	for _, e := range exitCodes {
		if e.code == code {
			return e.kind
		}
	}
	return "error"
}

// args wraps cobra's argument check so a wrong count is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usagef("%s: %v (usage: adopt %s)", cmd.Name(), err, cmd.Use)
		}
		return nil
	}
}

// rootArgs is the root command's argument check: a word that names no
// command is a usage error, with cobra's suggestions.
func rootArgs(cmd *cobra.Command, a []string) error {
	if len(a) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", a[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	if s := cmd.SuggestionsFor(a[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
	}
	return usagef("%s", msg)
}

func reasonsOf(err error) []string {
	var e *exitErr
	if errors.As(err, &e) {
		return e.reasons
	}
	return nil
}
