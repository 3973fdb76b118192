package main

import (
	"context"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/service"
)

type sink = outbox.Sink

// webhookURL is --webhook: the sink whose effects run sends and replay
// records for run.
type webhookURL struct {
	URL string `name:"webhook" placeholder:"URL" help:"${webhook_help}"`
}

// webhookDelete are the flags that delete a sent item at the destination,
// and the lookup that confirms a delete's 404: run's (a row cancelled while
// sending; the lookup also settles rows in review) and outbox cancel's.
type webhookDelete struct {
	DeleteURL string        `name:"webhook-delete-url" placeholder:"URL" help:"DELETE URL template for cancelling sent items; {external_id} is replaced. It must name a route that deletes and answers 2xx: a 404 (also what a server without the route answers) counts as gone only after this URL deleted another item in the same process, or when --webhook-lookup-url does not find the item either; otherwise the row is not cancelled"`
	LookupURL string        `name:"webhook-lookup-url" placeholder:"TEMPLATE" help:"GET URL template, {key} replaced by the outbox row id (the Idempotency-Key), by which the destination says whether it holds an item, so rows in review settle themselves and a delete's 404 is confirmed: 2xx = it is there (sent, its id read as for a send), 404 or 410 = never seen (sent again with the same key; a delete's 404 believed), anything else = cannot say now (asked again a minute later). \"Never seen\" is believed only once the lookup has found another sent row; if it denies that one, lookups stop. Rows it cannot answer for wait for a person (outbox review)"`
	Timeout   time.Duration `name:"webhook-timeout" default:"${webhook_timeout}" help:"timeout of one webhook request"`
}

// webhookSend are the flags of run's sending: the webhook sink's and the
// dispatcher's.
type webhookSend struct {
	Secret            string `name:"webhook-secret" help:"sign webhook requests: Jetledger-Signature v2=HMAC-SHA256 of the timestamp, Idempotency-Key, message id and body (and the deprecated v1 beside it). Better --webhook-secret-file; a command line is seen by every local user"`
	SecretFile        string `name:"webhook-secret-file" secret:"webhook-secret" placeholder:"FILE" help:"read --webhook-secret from this file (default under systemd: $CREDENTIALS_DIRECTORY/webhook-secret, if there); a second line is a second secret that signs too, while receivers move to a new one"`
	IDHeader          string `name:"webhook-id-header" help:"response header holding the destination's id for an item"`
	IDField           string `name:"webhook-id-field" default:"${webhook_id_field}" help:"response JSON field holding the destination's id (used when the header is absent)"`
	Idempotent        bool   `name:"webhook-idempotent" help:"the destination honours Idempotency-Key: re-send sends whose outcome is unknown instead of moving them to review"`
	RetryOn           string `name:"webhook-retry-on" default:"429" help:"comma-separated HTTP statuses that are retried with backoff, or none: list only statuses the destination documents as \"not processed\"; any other 5xx may come after the work was done, so it is an unknown outcome (review, or re-sent with the same key with --webhook-idempotent)"`
	OutboxWorkers     int    `name:"outbox-workers" default:"${outbox_workers}" help:"concurrent outbox sends"`
	OutboxMaxAttempts int    `name:"outbox-max-attempts" default:"${outbox_max_attempts}" help:"sends of an outbox row that provably did not arrive (a refused connection, a --webhook-retry-on status: 429 by default) before it is failed; any other 5xx is an unknown outcome, which goes to review (see --webhook-idempotent)"`
}

// webhook is run's webhook sink (service.Config.Webhook), nil without
// its URLs, once the flags the service cannot check are checked: their
// defaults are not 0, so a 0 was given.
func (c *runCmd) webhook() (*webhook.Config, error) {
	send, del := c.Send, c.Delete
	switch {
	case send.OutboxWorkers < 1:
		return nil, usagef("--outbox-workers %d: want at least 1", send.OutboxWorkers)
	case send.OutboxMaxAttempts < 1:
		return nil, usagef("--outbox-max-attempts %d: want at least 1", send.OutboxMaxAttempts)
	case del.Timeout <= 0:
		return nil, usagef("--webhook-timeout %s: must be positive", del.Timeout)
	}
	retryOn, err := webhook.ParseStatuses(send.RetryOn)
	switch {
	case err != nil:
		return nil, usagef("--webhook-retry-on %q: %v", send.RetryOn, err)
	case c.Webhook.URL == "" && del.DeleteURL == "" && del.LookupURL == "":
		return nil, nil
	}
	secrets := strings.Split(send.Secret, "\n") // a file's lines: a rotation
	return &webhook.Config{URL: c.Webhook.URL, Secret: secrets[0], Secrets: secrets[1:], Timeout: del.Timeout, DeleteURL: del.DeleteURL, LookupURL: del.LookupURL,
		ExternalIDHeader: send.IDHeader, ExternalIDField: send.IDField, Idempotent: send.Idempotent, RetryOn: retryOn}, nil
}

// replaySink is the sink replay records effects for, or nil without
// --webhook or --effects-subject: only its name goes into the outbox;
// replay sends nothing.
func replaySink(u webhookURL, effectsSubject string) (sink, error) {
	switch {
	case u.URL != "" && effectsSubject != "":
		return nil, usagef("--effects-subject and --webhook both name the sink of run's effects; give the one run has")
	case effectsSubject != "":
		// run's NATS sink has this name whatever its subject: the rows
		// replay records are the ones run's dispatcher sends.
		return service.RecordOnly(natssink.NameDefault), nil
	case u.URL == "":
		return nil, nil
	}
	return newSink(webhook.Config{URL: u.URL})
}

// deleteSink is outbox cancel's sink, or nil without --webhook-delete-url.
func deleteSink(del webhookDelete) (sink, error) {
	switch {
	case del.Timeout <= 0:
		return nil, usagef("--webhook-timeout %s: must be positive", del.Timeout)
	case del.DeleteURL == "" && del.LookupURL != "":
		return nil, usagef("--webhook-lookup-url needs --webhook-delete-url: it confirms a delete's 404")
	case del.DeleteURL == "":
		return nil, nil
	}
	return newSink(webhook.Config{DeleteURL: del.DeleteURL, LookupURL: del.LookupURL, Timeout: del.Timeout})
}

// newSink is the webhook sink of cfg, its refusals naming the flags.
func newSink(cfg webhook.Config) (sink, error) {
	cfg.Names = webhookNames
	s, err := webhook.New(cfg)
	if err != nil {
		return nil, configUsage(err)
	}
	return s, nil
}

// webhookNames are the flags that set the webhook sink's fields.
var webhookNames = say.Under(runNames.Settings, "Webhook")

// cancelOutbox cancels a row (webhook.Cancel), deleting the item at the
// destination through s when it may be there.
func cancelOutbox(ctx context.Context, st *ledger.Store, s sink, id string) (string, error) {
	ws, _ := s.(*webhook.Sink)
	out, err := webhook.Cancel(ctx, st, ws, id, webhookNames)
	return string(out), err
}
