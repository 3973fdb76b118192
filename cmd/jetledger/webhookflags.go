package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/webhook"
)

// webhookFlags configure the webhook sink, for run (sending) and outbox
// cancel (deleting at the destination).
type webhookFlags struct {
	url, secret, deleteURL, idHeader, idField, retryOn string
	timeout                                            time.Duration
	idempotent                                         bool
}

func (w *webhookFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.url, "webhook", "", "POST each applied message's payload to this URL through the outbox (Idempotency-Key: <outbox id>)")
	fs.StringVar(&w.secret, "webhook-secret", "", "sign webhook requests: Jetledger-Signature: v1=HMAC-SHA256(secret, timestamp + \".\" + body)")
	fs.DurationVar(&w.timeout, "webhook-timeout", webhook.TimeoutDefault, "timeout of one webhook request")
	fs.StringVar(&w.deleteURL, "webhook-delete-url", "", "DELETE URL template for cancelling sent items; {external_id} is replaced")
	fs.StringVar(&w.idHeader, "webhook-id-header", "", "response header holding the destination's id for an item")
	fs.StringVar(&w.idField, "webhook-id-field", webhook.ExternalIDFieldDefault, "response JSON field holding the destination's id (used when the header is absent)")
	fs.BoolVar(&w.idempotent, "webhook-idempotent", false, "the destination honours Idempotency-Key: re-send sends whose outcome is unknown instead of moving them to review")
	fs.StringVar(&w.retryOn, "webhook-retry-on", "429", "comma-separated HTTP statuses that are retried with backoff, or none: list only statuses the destination documents as \"not processed\"; any other 5xx may come after the work was done, so it is an unknown outcome (review, or re-sent with the same key with --webhook-idempotent)")
}

// sink builds the webhook sink, or nil when neither URL is set.
func (w *webhookFlags) sink() (consumer.Sink, error) {
	if w.url == "" && w.deleteURL == "" {
		return nil, nil
	}
	retryOn, err := parseStatuses(w.retryOn)
	if err != nil {
		return nil, usagef("--webhook-retry-on %q: %v", w.retryOn, err)
	}
	s, err := webhook.New(webhook.Config{URL: w.url, Secret: w.secret, Timeout: w.timeout, DeleteURL: w.deleteURL,
		ExternalIDHeader: w.idHeader, ExternalIDField: w.idField, Idempotent: w.idempotent, RetryOn: retryOn})
	if err != nil {
		return nil, usageError{err}
	}
	return s, nil
}

// parseStatuses reads "429,503" or "none" (no status: an empty, non-nil
// list, which webhook.Config reads as "retry none" rather than the default).
// webhook.New checks the range.
func parseStatuses(s string) ([]int, error) {
	if strings.EqualFold(strings.TrimSpace(s), "none") {
		return []int{}, nil
	}
	items := splitList(s)
	if len(items) == 0 {
		return nil, errors.New("want comma-separated HTTP statuses, or none")
	}
	codes := make([]int, 0, len(items))
	for _, it := range items {
		code, err := strconv.Atoi(it)
		if err != nil {
			return nil, fmt.Errorf("%q is not an HTTP status; want comma-separated statuses, or none", it)
		}
		codes = append(codes, code)
	}
	return codes, nil
}
