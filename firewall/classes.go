// This file holds how the firewall opens a traffic class (vocab.Class):
// the classes themselves and their spellings are vocab's, so config reads
// them without the firewall.

package firewall

import (
	"adoption/vocab"
)

// Class is one kind of new packet from outside to the node (vocab.Class).
type Class = vocab.Class

// ClassOpening is class c's opening from sources from (empty: any).
func ClassOpening(c Class, from string) Opening {
	o := Opening{Port: c.Port, Proto: c.Proto, Direction: HookInput, From: from, Family: c.Family, Class: c.Name}
	if c.Dst.IsValid() {
		o.To = c.Dst.String()
	}
	return o
}
