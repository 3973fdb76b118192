package sqlhandler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/jetledger/jetledger/internal/editdist"
)

// applyParams are the names Handler.Handle binds with sql.Named. The
// driver (modernc.org/sqlite) matches a parameter by its name after the
// prefix, so :data, @data, $data and #data all bind "data".
var applyParams = []string{"msg_id", "subject", "seq", "data"}

func (e *UnboundParamError) Error() string { return e.say(cmp.Or(e.Name, "Config.Apply")) }

// say is the message naming Apply as apply.
func (e *UnboundParamError) say(apply string) string {
	var b strings.Builder
	positional := false
	b.WriteString(apply + " uses ")
	for i, p := range e.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p)
		if s := closestParam(p); s != "" {
			fmt.Fprintf(&b, " (did you mean %s?)", s)
		}
		positional = positional || p[0] == '?'
	}
	if len(e.Params) == 1 {
		b.WriteString(", which is not bound")
	} else {
		b.WriteString(", which are not bound")
	}
	if positional {
		b.WriteString(" (positional parameters never are)")
	}
	b.WriteString(": the parameters are :msg_id, :subject, :seq and :data")
	return b.String()
}

// checkApplyParams returns an *UnboundParamError naming every parameter of
// apply that is not one of applyParams, nil if there is none; name is
// what Config.Names calls Apply.
func checkApplyParams(apply, name string) error {
	var bad []string
	for _, p := range sqlParams(apply) {
		if !strings.ContainsRune(":@$#", rune(p[0])) || !slices.Contains(applyParams, p[1:]) {
			bad = append(bad, p)
		}
	}
	if bad != nil {
		return &UnboundParamError{Params: bad, Name: name}
	}
	return nil
}

// closestParam returns the bound parameter p was probably meant to be, with
// p's prefix, or "" if none is close. Positional parameters have no guess.
func closestParam(p string) string {
	if len(p) < 2 || p[0] == '?' {
		return ""
	}
	name := strings.ToLower(p[1:])
	best, bestDist := "", 0
	for _, a := range applyParams {
		// A prefix either way catches :sub, :msg, :sequence and $data::x.
		if len(name) >= 3 && (strings.HasPrefix(a, name) || strings.HasPrefix(name, a)) {
			return p[:1] + a
		}
		if d := editdist.Distance(name, a); d <= max(1, len(a)/3) && (best == "" || d < bestDist) {
			best, bestDist = a, d
		}
	}
	if best == "" {
		return ""
	}
	return p[:1] + best
}
