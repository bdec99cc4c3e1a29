// YAML syntax errors with the line and column of the problem: the parser
// viper reads with says only a line, so a file it refuses is parsed again
// by one that says where exactly.
package config

import (
	"errors"
	"fmt"
	"os"

	yamlpos "go.yaml.in/yaml/v4"
)

// syntaxError describes why path is not YAML, with the line and column of
// the problem (and of the construct it is in); nil when it parses.
func syntaxError(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var v any
	err = yamlpos.Unmarshal(b, &v)
	var le *yamlpos.LoadError
	if !errors.As(err, &le) || le.Mark.Line == 0 {
		return err
	}
	msg := fmt.Sprintf("YAML syntax error at line %d, column %d: %s", le.Mark.Line, le.Mark.Column, le.Message)
	if le.ContextMsg != "" && le.ContextMark.Line > 0 && le.ContextMark != le.Mark {
		msg += fmt.Sprintf(" (%s that starts at line %d, column %d)", le.ContextMsg, le.ContextMark.Line, le.ContextMark.Column)
	}
	return errors.New(msg)
}
