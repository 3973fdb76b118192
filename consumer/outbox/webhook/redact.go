package webhook

import (
	"cmp"
	"errors"
	"net/url"
	"slices"
	"strings"
)

// redacted stands in for a secret in a URL.
const redacted = "REDACTED"

// RedactURL is u as it may be logged or stored: its user information and
// the value of every query parameter replaced by REDACTED, since either
// can be a credential (https://user:pw@host/hook?token=...). The path is
// kept: it says which destination. A URL that does not parse is
// redacted whole.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	switch {
	case u == "":
		return ""
	case err != nil, p.Host == "" && strings.Contains(u, "@"):
		return redacted // not a URL a request could use: user info in it cannot be told apart
	case p.User == nil && p.RawQuery == "":
		return u
	}
	// Cut by hand, not p.String(): that would escape a template's {key}.
	if p.User != nil {
		start := strings.Index(u, "://") + 3
		end := start + strings.IndexAny(u[start:]+"/", "/?#")
		if at := strings.LastIndex(u[start:end], "@"); at >= 0 {
			u = u[:start] + redacted + u[start+at:]
		}
	}
	if q := strings.IndexByte(u, '?'); q >= 0 {
		frag := ""
		if h := strings.IndexByte(u[q:], '#'); h >= 0 {
			u, frag = u[:q+h], u[q+h:]
		}
		vals, query := p.Query(), ""
		for k, v := range vals {
			if slices.Contains(v, "") {
				query = redacted // a bare key (?SECRET) is a value itself
			}
			vals[k] = []string{redacted}
		}
		u = u[:q+1] + cmp.Or(query, vals.Encode()) + frag
	}
	return u
}

// redactErr is err with the URL net/http quotes in it redacted
// (RedactURL): the outbox stores, and run logs, what a request's error
// says.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	return err
}
