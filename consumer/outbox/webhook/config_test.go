package webhook_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
)

// A refusal names the field as Config.Names says, or as itself.
func TestNewSaysTheCallersNames(t *testing.T) {
	t.Parallel()
	names := map[string]string{"URL": "--webhook", "DeleteURL": "--webhook-delete-url", "LookupURL": "--webhook-lookup-url", "Timeout": "--webhook-timeout",
		"Secret": "--webhook-secret", "Secrets": "--webhook-secret-next"}
	tests := []struct {
		name       string
		cfg        webhook.Config
		names      map[string]string
		wantReason string
	}{
		{name: "bad URL", cfg: webhook.Config{URL: "ftp://x"}, names: names, wantReason: `--webhook "ftp://x": want an absolute http or https URL`},
		{name: "bad URL, no names", cfg: webhook.Config{URL: "ftp://x"}, wantReason: `URL "ftp://x": want an absolute http or https URL`},
		{name: "no URL", cfg: webhook.Config{}, names: names, wantReason: "--webhook is required"},
		{name: "bad DeleteURL", cfg: webhook.Config{URL: "http://ok", DeleteURL: "nope"}, names: names,
			wantReason: `--webhook-delete-url "nope": want an absolute http or https URL`},
		{name: "lookup without key", cfg: webhook.Config{URL: "http://ok", LookupURL: "http://ok/items"}, names: names,
			wantReason: `--webhook-lookup-url "http://ok/items": want a template with {key}, which is replaced by the outbox row id`},
		{name: "negative timeout", cfg: webhook.Config{URL: "http://ok", Timeout: -time.Second}, names: names, wantReason: "--webhook-timeout -1s: must not be negative"},
		{name: "RetryOn a success", cfg: webhook.Config{URL: "http://ok", RetryOn: []int{200}}, wantReason: "RetryOn 200: want an HTTP failure status, 100-599 but not 2xx"},
		{name: "an empty secret", cfg: webhook.Config{URL: "http://ok", Secret: "a", Secrets: []string{""}}, names: names,
			wantReason: "--webhook-secret-next: secret 1 is empty; an empty secret signs nothing a receiver can trust"},
		{name: "a secret twice", cfg: webhook.Config{URL: "http://ok", Secret: "a", Secrets: []string{"a"}}, names: names,
			wantReason: "--webhook-secret-next: a secret is given twice"},
		{name: "three secrets", cfg: webhook.Config{URL: "http://ok", Secret: "a", Secrets: []string{"b", "c"}}, names: names,
			wantReason: "--webhook-secret and --webhook-secret-next: 3 secrets, want at most 2 (the old and the new while one is rotated)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.Names = tt.names
			_, err := webhook.New(cfg)
			var ce *webhook.ConfigError
			if !errors.Is(err, webhook.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Reason != tt.wantReason {
				t.Fatalf("New: %v, want a *ConfigError said %q", err, tt.wantReason)
			}
		})
	}
}

func TestParseStatuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "429", want: []int{429}}, {in: " 429, 503 ", want: []int{429, 503}}, {in: "None", want: []int{}},
		{in: "", wantErr: true}, {in: ",", wantErr: true}, {in: "abc", wantErr: true}, {in: "200", wantErr: true}, {in: "600", wantErr: true},
	} {
		got, err := webhook.ParseStatuses(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) || (tt.want != nil && got == nil) {
			t.Errorf("ParseStatuses(%q) = %v, %v; want %v (error %t)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// A sent row cannot be cancelled without a way to delete it: the refusal
// names the field that gives one, as names says.
func TestCancelSaysWhatDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dest := webhooktest.NewDestination(t, false)
	s, err := webhook.New(webhook.Config{URL: dest.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if _, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "m1", Stream: "S", Sequence: 1, Subject: "s", Data: []byte(`{}`)}},
		func(ctx context.Context, tx *ledger.Tx, _ ledger.Delivery) error {
			id, err = tx.Enqueue(ctx, s.Name(), []byte(`{}`))
			return err
		}, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	it, err := st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ext, err := s.Send(ctx, it)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Transition(ctx, id, ledger.Sent, ledger.Params{Worker: "w", ExternalID: ext}); err != nil {
		t.Fatal(err)
	}
	_, err = webhook.Cancel(ctx, st, nil, id, map[string]string{"DeleteURL": "--webhook-delete-url"})
	if !errors.Is(err, outbox.ErrStillAtDestination) || !strings.HasSuffix(err.Error(), "(give --webhook-delete-url to delete it there)") {
		t.Fatalf("Cancel without a sink: %v", err)
	}
	del, err := webhook.New(webhook.Config{DeleteURL: dest.DeleteURL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := webhook.Cancel(ctx, st, del, id, nil); err != nil {
		t.Fatalf("Cancel through DeleteURL: %s, %v", out, err)
	}
}
