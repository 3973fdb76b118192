package webhook

import (
	"net/url"
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
	if u == "" {
		return ""
	}
	p, err := url.Parse(u)
	if err != nil {
		return redacted
	}
	if p.User != nil {
		p.User = url.User(redacted)
	}
	if p.RawQuery != "" {
		q := p.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		p.RawQuery = q.Encode()
	}
	return p.String()
}

// redactError is err's text with every form of rawURL in it redacted: net/http
// quotes the request's URL in its errors, which the outbox stores.
func redactError(msg, rawURL string) string {
	if rawURL == "" {
		return msg
	}
	safe := RedactURL(rawURL)
	for _, form := range []string{rawURL, strings.TrimSuffix(rawURL, "/")} {
		if form != "" {
			msg = strings.ReplaceAll(msg, form, safe)
		}
	}
	return msg
}
