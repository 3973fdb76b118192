package main

import (
	"fmt"
	"slices"
	"strings"
)

// applyParams are the names eventsHandler.handle binds with sql.Named. The
// driver (modernc.org/sqlite) matches a parameter by its name after the
// prefix, so :data, @data, $data and #data all bind "data".
var applyParams = []string{"msg_id", "subject", "seq", "data"}

// unboundParamError is --apply using parameters the handler does not bind:
// SQLite accepts any parameter name at compile time, so without this check a
// typo fails every message at run time and dead-letters it.
type unboundParamError struct {
	Params []string // as written in --apply, e.g. ":dta", "?1"
}

func (e *unboundParamError) Error() string {
	var b strings.Builder
	positional := false
	b.WriteString("--apply uses ")
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

// checkApplyParams returns an *unboundParamError naming every parameter of
// apply that is not one of applyParams, nil if there is none.
func checkApplyParams(apply string) error {
	var bad []string
	for _, p := range sqlParams(apply) {
		if !strings.ContainsRune(":@$#", rune(p[0])) || !slices.Contains(applyParams, p[1:]) {
			bad = append(bad, p)
		}
	}
	if bad != nil {
		return &unboundParamError{Params: bad}
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
		if d := editDistance(name, a); d <= max(1, len(a)/3) && (best == "" || d < bestDist) {
			best, bestDist = a, d
		}
	}
	if best == "" {
		return ""
	}
	return p[:1] + best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours cost one.
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
