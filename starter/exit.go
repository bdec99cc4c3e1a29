// Exit codes, one table for --help and the README, and the errors that
// carry them.
package main

import (
	"errors"
	"fmt"
	"strings"
)

// Exit codes, as Temporal users expect them.
const (
	exitOK      = 0 // done (or accepted, when the output says so)
	exitError   = 1 // an error: not delivered, unreachable, timed out, a request that failed once accepted, a wait that ended on a failure
	exitRefused = 2 // refused: the node's (or the fleet's) workflow turned the request down, or a preview refused the flip
	exitUsage   = 3 // usage: a bad flag, argument or value; nothing was sent
)

const exitCodesHelp = `Exit codes:
  0  done (a request is done or accepted, as printed)
  1  error: not delivered, Temporal unreachable, timed out, a request that failed
     once accepted (a preview whose node did not answer), a wait that ended on a failure
  2  refused: the node's (or the fleet's) workflow refused the request, or the
     preview refused the flip
  3  usage: a bad flag, argument or value; nothing was sent`

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

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitErr
	if errors.As(err, &e) {
		return e.code
	}
	// cobra's own argument and flag errors are usage errors.
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "requires at most"} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, " "+p) {
			return exitUsage
		}
	}
	return exitError
}

func exitKind(code int) string {
	switch code {
	case exitRefused:
		return "refused"
	case exitUsage:
		return "usage"
	}
	return "error"
}

func reasonsOf(err error) []string {
	var e *exitErr
	if errors.As(err, &e) {
		return e.reasons
	}
	return nil
}
