package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/ledger"
)

// This file is the binary's one use of the outbox dispatcher and its
// webhook sink, so that moving those packages touches it alone.

type (
	dispatcher = outbox.Dispatcher
	sink       = outbox.Sink
)

const (
	outboxWorkersDefault     = outbox.WorkersDefault
	outboxMaxAttemptsDefault = outbox.MaxAttemptsDefault
	webhookTimeoutDefault    = webhook.TimeoutDefault
	webhookIDFieldDefault    = webhook.ExternalIDFieldDefault
)

// webhookFlags configure the webhook sink, for run (sending), replay
// (recording effects for run) and outbox cancel (deleting at the destination).
type webhookFlags struct {
	URL        string        `name:"webhook" placeholder:"URL" help:"POST each applied message's payload to this URL through the outbox (Idempotency-Key: <outbox id>)"`
	Secret     string        `name:"webhook-secret" help:"sign webhook requests: Jetledger-Signature: v1=HMAC-SHA256(secret, timestamp + \".\" + body)"`
	Timeout    time.Duration `name:"webhook-timeout" default:"${webhook_timeout}" help:"timeout of one webhook request"`
	DeleteURL  string        `name:"webhook-delete-url" placeholder:"URL" help:"DELETE URL template for cancelling sent items; {external_id} is replaced"`
	IDHeader   string        `name:"webhook-id-header" help:"response header holding the destination's id for an item"`
	IDField    string        `name:"webhook-id-field" default:"${webhook_id_field}" help:"response JSON field holding the destination's id (used when the header is absent)"`
	Idempotent bool          `name:"webhook-idempotent" help:"the destination honours Idempotency-Key: re-send sends whose outcome is unknown instead of moving them to review"`
	RetryOn    string        `name:"webhook-retry-on" default:"429" help:"comma-separated HTTP statuses that are retried with backoff, or none: list only statuses the destination documents as \"not processed\"; any other 5xx may come after the work was done, so it is an unknown outcome (review, or re-sent with the same key with --webhook-idempotent)"`
}

// sink builds the webhook sink, or nil when neither URL is set.
func (w webhookFlags) sink() (sink, error) {
	if w.URL == "" && w.DeleteURL == "" {
		return nil, nil
	}
	retryOn, err := parseStatuses(w.RetryOn)
	if err != nil {
		return nil, usagef("--webhook-retry-on %q: %v", w.RetryOn, err)
	}
	s, err := webhook.New(webhook.Config{URL: w.URL, Secret: w.Secret, Timeout: w.Timeout, DeleteURL: w.DeleteURL,
		ExternalIDHeader: w.IDHeader, ExternalIDField: w.IDField, Idempotent: w.Idempotent, RetryOn: retryOn})
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

// newDispatcher is run's outbox dispatcher: its claim lease comes from the plan.
func newDispatcher(st *ledger.Store, s sink, plan ackwait.Plan, workers, attempts int, log *slog.Logger) (*dispatcher, error) {
	d, err := outbox.New(st, outbox.Config{Sink: s, Workers: workers,
		MaxAttempts: attempts, Lease: plan.ClaimLease(s.Timeout()), Logger: log})
	if err != nil {
		return nil, usageError{err}
	}
	return d, nil
}

// cancelOutbox cancels a row, deleting the item at the destination through
// s when it may be there; without s, rows never sent can still be cancelled.
func cancelOutbox(ctx context.Context, st *ledger.Store, s sink, id string) (string, error) {
	var del outbox.Deleter
	if d, ok := s.(outbox.Deleter); ok {
		del = d
	}
	out, err := outbox.Cancel(ctx, st, del, id)
	if errors.Is(err, outbox.ErrStillAtDestination) && del == nil {
		err = fmt.Errorf("%w (give --webhook-delete-url to delete it there)", err)
	}
	return string(out), err
}
