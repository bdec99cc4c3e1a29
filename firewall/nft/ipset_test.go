package nft

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"adoption/firewall"
)

// "-m set --match-set NAME src|dst" decodes to the set's members where
// they were read, and is undecidable, naming the set, where not.
func TestDecodeIPSetMatch(t *testing.T) {
	bl := &IPSet{Name: "bl", Type: "hash:net", Family: firewall.FamilyIP, Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	ports := &IPSet{Name: "bp", Type: "hash:ip,port", Family: firewall.FamilyIP}
	d := Decoder{Family: firewall.FamilyIP, IPSets: map[uint16]*IPSet{0: bl, 3: ports}}
	rule := func(index uint16, flags byte) firewall.Rule {
		info := xt.Unknown([]byte{byte(index), byte(index >> 8), 1, flags})
		return d.Rule(&nftables.Rule{Exprs: []expr.Any{&expr.Match{Name: "set", Rev: 1, Info: &info}, &expr.Verdict{Kind: expr.VerdictDrop}}})
	}
	for _, c := range []struct {
		name   string
		index  uint16
		flags  byte
		want   firewall.Cond
		reason string
	}{
		{"src", 0, 0x02, firewall.Cond{Kind: firewall.CondSaddr, Prefixes: bl.Prefixes}, ""},
		{"dst", 0, 0x00, firewall.Cond{Kind: firewall.CondDaddr, Prefixes: bl.Prefixes}, ""},
		{"! src", 0, 0x03, firewall.Cond{Kind: firewall.CondSaddr, Prefixes: bl.Prefixes, Negate: true}, ""},
		{"another type", 3, 0x02, firewall.Cond{}, "match on ipset bp of type hash:ip,port"},
		{"not read", 7, 0x02, firewall.Cond{}, "match on ipset with index 7, whose members could not be read"},
	} {
		r := rule(c.index, c.flags)
		if len(r.Conds) != 1 {
			t.Errorf("%s: conds %+v", c.name, r.Conds)
			continue
		}
		got := r.Conds[0]
		if c.reason != "" {
			if got.Kind != firewall.CondUndecidable || !strings.Contains(got.Reason, c.reason) {
				t.Errorf("%s: %+v, want undecidable saying %q", c.name, got, c.reason)
			}
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
