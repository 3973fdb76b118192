package partition

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishSubject is the subject to publish so that the stream of cfg
// stores a message as stored again: stored itself where the stream maps
// nothing (or nothing of this subject), else the subject its transform
// maps to stored (1.pay.alice is stored from pay.alice by a partition
// mapping). The answer is checked by the server's own transform, so a
// copy lands in the partition its first one did.
func PublishSubject(cfg jetstream.StreamConfig, stored string) (string, error) {
	tr := cfg.SubjectTransform
	if tr == nil || tr.Destination == "" {
		return stored, nil
	}
	src := cmp.Or(tr.Source, ">")
	if !server.SubjectMatchesFilter(stored, src) && slices.ContainsFunc(cfg.Subjects, func(f string) bool { return server.SubjectMatchesFilter(stored, f) }) {
		return stored, nil // the stream stores it as it is published
	}
	fail := func(why string) (string, error) {
		return "", fmt.Errorf("%w: stream %s stores %s through %s -> %s: %s", ErrNoInverse, cfg.Name, stored, src, tr.Destination, why)
	}
	have := strings.Split(stored, ".")
	wild := map[int]string{}
	var rest []string
	for i, t := range strings.Split(tr.Destination, ".") {
		switch m := transformToken.FindStringSubmatch(t); {
		case t == ">":
			if i >= len(have) {
				return fail("too few tokens")
			}
			rest = have[i:]
			have = have[:i]
		case i >= len(have):
			return fail("too few tokens")
		case m == nil && strings.Contains(t, "{{"):
			return fail("the mapping uses a function other than wildcard and partition")
		case m == nil && t != have[i]:
			return fail("token " + strconv.Itoa(i+1) + " differs")
		case m != nil && strings.EqualFold(m[1], "wildcard"):
			k, _ := strconv.Atoi(m[2])
			if v, ok := wild[k]; ok && v != have[i] {
				return fail("wildcard " + m[2] + " has two values")
			}
			wild[k] = have[i]
		case m != nil:
			if _, err := strconv.Atoi(have[i]); err != nil {
				return fail("token " + strconv.Itoa(i+1) + " is not a partition number")
			}
		}
		if rest != nil {
			break
		}
	}
	if rest == nil && len(have) != len(strings.Split(tr.Destination, ".")) {
		return fail("too many tokens")
	}
	toks := strings.Split(src, ".")
	n := 0
	for i, t := range toks {
		switch t {
		case "*":
			n++
			v, ok := wild[n]
			if !ok {
				return fail("the mapping drops wildcard " + strconv.Itoa(n))
			}
			toks[i] = v
		case ">":
			if rest == nil {
				return fail("the mapping drops the '>' tail")
			}
			toks[i] = strings.Join(rest, ".")
		}
	}
	subject := strings.Join(toks, ".")
	st, err := server.NewSubjectTransform(src, tr.Destination)
	if err != nil {
		return fail(err.Error())
	}
	if got, err := st.Match(subject); err != nil || got != stored {
		return fail(fmt.Sprintf("%s would be stored as %s", subject, got))
	}
	return subject, nil
}

// transformToken is a mapping function token: {{wildcard(1)}},
// {{partition(4,1)}}.
var transformToken = regexp.MustCompile(`(?i)^\{\{\s*(wildcard|partition)\s*\(\s*(\d+)[^)]*\)\s*\}\}$`)
