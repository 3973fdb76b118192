package partition

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Transform is the subject mapping of a stream partitioned into n by the
// key-th '*' token of subject (counting from 1), with NATS's deterministic
// partition mapping: a message of subject is stored as
// "<partition>.<subject>", so that Filter(i) is partition i's share and
// every message of a key lands in one partition. A '>' that is not the
// last token is ErrWildcardNotLast; a key past the '*' tokens is a
// *KeyError.
func Transform(subject string, n, key int) (*jetstream.SubjectTransformConfig, error) {
	toks := strings.Split(subject, ".")
	wild := 0
	for i, t := range toks {
		switch {
		case t == "*":
			wild++
			toks[i] = fmt.Sprintf("{{wildcard(%d)}}", wild)
		case t == ">" && i != len(toks)-1:
			return nil, fmt.Errorf("partition: transform %q: %w", subject, ErrWildcardNotLast)
		}
	}
	if key < 1 || key > wild {
		return nil, &KeyError{Subject: subject, Key: key, Wildcards: wild}
	}
	return &jetstream.SubjectTransformConfig{Source: subject,
		Destination: fmt.Sprintf("{{partition(%d,%d)}}.%s", n, key, strings.Join(toks, "."))}, nil
}
