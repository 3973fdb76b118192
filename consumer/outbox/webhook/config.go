package webhook

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/internal/say"
)

// Defaults for Config fields left at zero.
const (
	TimeoutDefault         = 10 * time.Second
	NameDefault            = "webhook"
	ExternalIDFieldDefault = "id"
	maxBody                = 64 << 10
	excerpt                = 256
)

// ErrInvalidConfig: a Config field is missing or malformed.
var ErrInvalidConfig = errors.New("webhook: invalid configuration")

// Config configures a Sink.
type Config struct {
	// URL receives a POST of each item's payload: http or https. Required
	// unless the sink is only used to delete (DeleteURL).
	URL string
	// Secret, if set, signs each request (HeaderTimestamp, HeaderSignature;
	// package signature verifies it).
	Secret string
	// Secrets are secrets each request is also signed with, after Secret:
	// to rotate, sign with the old and the new, one signature of each, so
	// that a receiver holding either accepts the request; then move the
	// receivers to the new one and drop the old. At most two secrets in
	// all (Secret and Secrets), none empty, none repeated. Default none.
	Secrets []string
	// OmitV1 stops sending the deprecated v1 signatures (timestamp and
	// body only, not the Idempotency-Key) beside the v2 ones. Set it once
	// every receiver verifies v2. Default false: both are sent.
	OmitV1 bool
	// Timeout bounds one request. Default 10s.
	Timeout time.Duration
	// DeleteURL is where a sent item is DELETEd when its row is cancelled;
	// {external_id} is replaced by the destination's id, path-escaped. It
	// must name a route that deletes and answers 2xx. Its 404 counts only
	// once proved: after it deleted another item, or when LookupURL
	// confirms the item is gone (see outbox.Cancel).
	// Empty: sent items cannot be deleted, so cancelling them fails.
	DeleteURL string
	// LookupURL is where the destination answers whether it holds an item
	// by its idempotency key: {key} is replaced by the outbox row id,
	// path-escaped. GET answers 2xx (found; the external id as for a send)
	// or 404/410 (never seen). Empty: rows in review wait for a person.
	LookupURL string
	// ExternalIDHeader, if set, is the response header holding the
	// destination's id for the item. Otherwise the JSON body's
	// ExternalIDField (default "id") is used. Failing both the item has no
	// external id: it cannot be deleted from here, and cancelling it after
	// it was sent needs a person.
	ExternalIDHeader string
	ExternalIDField  string
	// Idempotent declares that the destination honours Idempotency-Key:
	// sends with an unknown outcome are then repeated with the same key
	// instead of going to review.
	Idempotent bool
	// RetryOn lists the HTTP statuses the destination documents as "not
	// processed": a send answered with one is retried with backoff. List
	// only statuses the destination promises mean that; any other 5xx is an
	// unknown outcome (the application may have done the work before it
	// failed) and goes to review unless Idempotent. Statuses 100-599, no 2xx.
	// Default (nil): 429, which RFC 6585 defines as refused before processing.
	// An empty, non-nil slice retries no status.
	RetryOn []int
	// Name is the sink's name in the outbox. Default "webhook".
	Name string
	// Client makes the requests. Default: a client that follows no redirects.
	Client *http.Client
	// Names say the fields in the caller's words in a refusal
	// (*ConfigError): a field's name ("URL") to the caller's ("--webhook").
	// A field not in it is said as itself.
	Names map[string]string
}

// New validates cfg. A refusal is a *ConfigError naming the field as
// cfg.Names says.
func New(cfg Config) (*Sink, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.RetryOn == nil {
		cfg.RetryOn = []int{http.StatusTooManyRequests}
	}
	cfg.RetryOn = slices.Clone(cfg.RetryOn) // the caller's slice may change
	cfg.Secrets = slices.Clone(cfg.Secrets)
	cfg.Timeout = cmp.Or(cfg.Timeout, TimeoutDefault)
	cfg.Name = cmp.Or(cfg.Name, NameDefault)
	cfg.ExternalIDField = cmp.Or(cfg.ExternalIDField, ExternalIDFieldDefault)
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Sink{cfg: cfg, secrets: cfg.signingSecrets()}, nil
}

// MaxSecrets is how many secrets a Sink signs with at most: the old and
// the new while one is rotated.
const MaxSecrets = 2

// signingSecrets is Secret, if set, then Secrets.
func (cfg Config) signingSecrets() []string {
	if cfg.Secret == "" {
		return slices.Clone(cfg.Secrets)
	}
	return append([]string{cfg.Secret}, cfg.Secrets...)
}

// validate checks cfg's fields in the order a command line names them.
func (cfg Config) validate() error {
	name := func(path string) string { return say.Name(cfg.Names, path) }
	for _, code := range cfg.RetryOn {
		if err := checkStatus(code); err != nil {
			return refuse("%s %v", name("RetryOn"), err)
		}
	}
	switch {
	case cfg.Timeout < 0:
		return refuse("%s %s: must not be negative", name("Timeout"), cfg.Timeout)
	case cfg.LookupURL != "" && !strings.Contains(cfg.LookupURL, "{key}"):
		// Without {key} every row would be asked about the same URL, and
		// one answer would settle them all.
		return refuse("%s %q: want a template with {key}, which is replaced by the outbox row id", name("LookupURL"), RedactURL(cfg.LookupURL))
	case cfg.URL == "" && cfg.DeleteURL == "":
		return refuse("%s is required", name("URL"))
	}
	if err := cfg.checkSecrets(); err != nil {
		return err
	}
	for _, u := range []struct{ path, url string }{{"URL", cfg.URL}, {"DeleteURL", cfg.DeleteURL}, {"LookupURL", cfg.LookupURL}} {
		probe := strings.NewReplacer("{external_id}", "x", "{key}", "x").Replace(u.url)
		if err := checkURL(probe); u.url != "" && err != nil {
			return refuse("%s %q: %v", name(u.path), RedactURL(u.url), redactErr(err))
		}
	}
	return nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return errors.New("want an absolute http or https URL")
	}
	return nil
}

// checkSecrets refuses an empty secret in Secrets (an HMAC key anyone can
// guess), a repeated one, and more than MaxSecrets with Secret.
func (cfg Config) checkSecrets() error {
	name := func(path string) string { return say.Name(cfg.Names, path) }
	all := cfg.signingSecrets()
	for i, s := range cfg.Secrets {
		if s == "" {
			return refuse("%s: secret %d is empty; an empty secret signs nothing a receiver can trust", name("Secrets"), i+1)
		}
	}
	for i, s := range all {
		if slices.Contains(all[i+1:], s) {
			return refuse("%s: a secret is given twice", name("Secrets"))
		}
	}
	if len(all) > MaxSecrets {
		return refuse("%s and %s: %d secrets, want at most %d (the old and the new while one is rotated)", name("Secret"), name("Secrets"), len(all), MaxSecrets)
	}
	return nil
}

// checkStatus refuses a status RetryOn cannot hold.
func checkStatus(code int) error {
	if code < 100 || code > 599 || code/100 == 2 {
		return fmt.Errorf("%d: want an HTTP failure status, 100-599 but not 2xx", code)
	}
	return nil
}

// ParseStatuses reads RetryOn from text: "429,503", or "none" (an empty,
// non-nil list: retry no status, where nil is the default).
func ParseStatuses(s string) ([]int, error) {
	if strings.EqualFold(strings.TrimSpace(s), "none") {
		return []int{}, nil
	}
	var codes []int
	for it := range strings.SplitSeq(s, ",") {
		if it = strings.TrimSpace(it); it == "" {
			continue
		}
		code, err := strconv.Atoi(it)
		if err != nil {
			return nil, fmt.Errorf("%q is not an HTTP status; want comma-separated statuses, or none", it)
		}
		if err := checkStatus(code); err != nil {
			return nil, err
		}
		codes = append(codes, code)
	}
	if len(codes) == 0 {
		return nil, errors.New("want comma-separated HTTP statuses, or none")
	}
	return codes, nil
}

// ConfigError is New's refusal of a Config: Reason says what is wrong,
// naming the fields as Config.Names says, so that a caller prints it as
// it is. It is ErrInvalidConfig for errors.Is.
type ConfigError struct{ Reason string }

func (e *ConfigError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Reason }

// Refusal is Reason: what a command line prints as its usage error.
func (e *ConfigError) Refusal() string { return e.Reason }

// Unwrap gives ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func refuse(format string, a ...any) error {
	return &ConfigError{Reason: fmt.Sprintf(format, a...)}
}
