// This file holds the one rule for names (node, module, owner, container):
// the pattern, its length bound and its human text.

package vocab

import "regexp"

// namePattern is the one pattern every name (node, module, owner, container)
// must match. It is strict on purpose: a name ends up in an nftables rule
// comment (adoption:<node>:<owner>:<port>/<proto>, at most 128 bytes), in a
// Docker container name and in file paths under state_dir, so it may carry
// neither ':' nor '/' nor anything a shell or a path would interpret.
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,30}[a-z0-9])?$`)

// MaxNameLen keeps a mark comment well under the kernel's 128-byte user-data
// limit: "adoption:" + node + ":" + owner + ":" + "65535/tcp".
const MaxNameLen = 32

// ValidName reports whether s can be used as a node, module, owner or
// container name.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// NameRule is the human text of namePattern, for error messages.
const NameRule = "1-32 characters: lowercase letters, digits, '-' and '_', starting and ending with a letter or digit"
