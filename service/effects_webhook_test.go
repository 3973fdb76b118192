package service

import (
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
)

// Effects beside Webhook (no Sink given): the refusal names the field given.
func TestEffectsBesideWebhookNamesWebhook(t *testing.T) {
	t.Parallel()
	c := Config{DB: "x.db", Webhook: &webhook.Config{URL: "http://x"}, Effects: &Effects{Subject: "fx.a"}}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "Webhook") {
		t.Fatalf("%v: want a refusal naming Webhook, the field given", err)
	}
}
