package main

import (
	"flag"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/webhook"
)

// webhookFlags configure the webhook sink, for run (sending) and outbox
// cancel (deleting at the destination).
type webhookFlags struct {
	url, secret, deleteURL, idHeader, idField string
	timeout                                   time.Duration
	idempotent                                bool
}

func (w *webhookFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.url, "webhook", "", "POST each applied message's payload to this URL through the outbox (Idempotency-Key: <outbox id>)")
	fs.StringVar(&w.secret, "webhook-secret", "", "sign webhook requests: Jetledger-Signature: v1=HMAC-SHA256(secret, timestamp + \".\" + body)")
	fs.DurationVar(&w.timeout, "webhook-timeout", webhook.TimeoutDefault, "timeout of one webhook request")
	fs.StringVar(&w.deleteURL, "webhook-delete-url", "", "DELETE URL template for cancelling sent items; {external_id} is replaced")
	fs.StringVar(&w.idHeader, "webhook-id-header", "", "response header holding the destination's id for an item")
	fs.StringVar(&w.idField, "webhook-id-field", webhook.ExternalIDFieldDefault, "response JSON field holding the destination's id (used when the header is absent)")
	fs.BoolVar(&w.idempotent, "webhook-idempotent", false, "the destination honours Idempotency-Key: re-send sends whose outcome is unknown instead of moving them to review")
}

// sink builds the webhook sink, or nil when neither URL is set.
func (w *webhookFlags) sink() (consumer.Sink, error) {
	if w.url == "" && w.deleteURL == "" {
		return nil, nil
	}
	s, err := webhook.New(webhook.Config{URL: w.url, Secret: w.secret, Timeout: w.timeout, DeleteURL: w.deleteURL,
		ExternalIDHeader: w.idHeader, ExternalIDField: w.idField, Idempotent: w.idempotent})
	if err != nil {
		return nil, usageError{err}
	}
	return s, nil
}
