// Package say names a library's settings in its caller's words.
//
// A library's refusal names the setting that fixes it. A Go program reads
// its Config's fields ("Plan.Deadline"); a command line sets them by flags
// ("--deadline"). Each Config that names settings in its errors has a
// Names field, a map from a setting's path in that Config to the caller's
// name for it, and says every name through Name, so that the caller gives
// one table instead of re-checking and re-wording.
package say

import "strings"

// Name is what names calls the setting at path, or path itself.
func Name(names map[string]string, path string) string {
	if s, ok := names[path]; ok {
		return s
	}
	return path
}

// Under is the part of names below prefix, for the Config at that path:
// Under({"Consumer.Plan.Deadline": "--deadline"}, "Consumer") is
// {"Plan.Deadline": "--deadline"}. A path not in the result is said as
// itself there, so the names a Go program sees stay paths of its own
// Config: Under gives paths from the Config at prefix only when names
// has some there.
func Under(names map[string]string, prefix string) map[string]string {
	var sub map[string]string
	for k, v := range names {
		if rest, ok := strings.CutPrefix(k, prefix+"."); ok {
			if sub == nil {
				sub = map[string]string{}
			}
			sub[rest] = v
		}
	}
	return sub
}
