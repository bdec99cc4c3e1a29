// This file holds a mark as a value: the comment that names a rule the
// mesh added (adoption:<node>:<owner>:<port>/<proto>) and a marked rule as
// the kernel holds it. Placing, finding and removing them is package
// marks'; these travel in workflow histories and the node's status.

package firewall

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"adoption/vocab"
)

// Mark identifies a rule the mesh added to the found firewall. It travels in
// the rule's comment, "adoption:<node>:<owner>:<port>/<proto>", which is the
// only thing that tells the mesh's rules from the predecessor's: a rule
// without it is never removed, even when it is otherwise identical.
type Mark struct {
	Node  string `json:"node"`
	Owner string `json:"owner"`
	Port  uint16 `json:"port"`
	Proto string `json:"proto"`
}

// maxCommentLen is the longest comment nft and iptables-nft print back:
// libnftnl reads a rule comment of at most 128 bytes including its NUL.
const MaxCommentLen = 127

// Comment is the rule comment carrying the mark.
func (m Mark) Comment() string {
	return fmt.Sprintf("%s%s:%s:%d/%s", MarkPrefix, m.Node, m.Owner, m.Port, m.Proto)
}

// String is the mark as its comment.
func (m Mark) String() string { return m.Comment() }

// Validate says what is wrong with the mark, naming the value, or nil.
func (m Mark) Validate() error {
	var errs []error
	if !vocab.ValidName(m.Node) {
		errs = append(errs, fmt.Errorf("node name %q is not valid (%s)", m.Node, vocab.NameRule))
	}
	if !vocab.ValidName(m.Owner) {
		errs = append(errs, fmt.Errorf("owner name %q is not valid (%s)", m.Owner, vocab.NameRule))
	}
	if err := (vocab.Port{Num: m.Port, Proto: m.Proto}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && len(m.Comment()) > MaxCommentLen {
		errs = append(errs, fmt.Errorf("comment %q is %d bytes, longer than the %d a rule comment holds", m.Comment(), len(m.Comment()), MaxCommentLen))
	}
	return errors.Join(errs...)
}

// ParseMark reads a mark from a rule comment. It is strict: anything but the
// exact form Comment writes, with valid names, is not a mark.
func ParseMark(comment string) (Mark, bool) {
	rest, ok := strings.CutPrefix(comment, MarkPrefix)
	if !ok {
		return Mark{}, false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return Mark{}, false
	}
	num, proto, ok := strings.Cut(parts[2], "/")
	if !ok {
		return Mark{}, false
	}
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil {
		return Mark{}, false
	}
	m := Mark{Node: parts[0], Owner: parts[1], Port: uint16(n), Proto: proto}
	if m.Validate() != nil || m.Comment() != comment { // "+80", "080" and the like
		return Mark{}, false
	}
	return m, true
}

// MarkedRule is one marked rule where the kernel holds it.
type MarkedRule struct {
	Mark   Mark   `json:"mark"`
	Family string `json:"family"`
	Table  string `json:"table"`
	Chain  string `json:"chain"`
	Handle uint64 `json:"handle"`
	// Placement says, when Open or OpenForward could not place the mark
	// both where it takes effect and after every source deny of the found
	// firewall, what stands in the way (see placeIn, laterDenies); "" when
	// nothing does. It travels with the marks into the node's status.
	Placement string `json:"placement,omitempty"`
}

// String names the rule and where it is.
func (r MarkedRule) String() string {
	return fmt.Sprintf("%s %s %s handle %d (%s)", r.Family, r.Table, r.Chain, r.Handle, r.Mark.Comment())
}
