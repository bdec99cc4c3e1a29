package eval

import ()

// WithoutShortcuts runs f with the evaluator's shortcuts switched off.
func WithoutShortcuts(f func()) {
	shortcuts = false
	defer func() { shortcuts = true }()
	f()
}
