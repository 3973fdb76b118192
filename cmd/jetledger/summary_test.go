package main

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/nats-io/nats.go/jetstream"
)

// A quiet run is seen alive: every --summary-interval it logs, at info, the
// messages applied since the start and the outbox rows sent, queued and in
// review; each failed send is a warn line with the row, the sink, the
// attempt and the error. The destination first answers 429 (retryable),
// then accepts.
func TestRunLogsASummaryAndEachFailedSend(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "SUM", Subjects: []string{"sum.>"}})
	publishEvents(t, js, "sum.in", 3)
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusTooManyRequests)
	run := startCommand(t, "run", "--nats", srv.ClientURL(), "--db", filepath.Join(t.TempDir(), "l.db"), "--stream", "SUM",
		"--webhook", dest.URL(), "--log-format", "json", "--summary-interval", "200ms")

	summary := func(want map[string]float64) bool {
		_, ok := run.record(func(r map[string]any) bool {
			if _, ok := r["uptime"]; !ok || r["level"] != "INFO" {
				return false
			}
			for k, v := range want {
				if r[k] != v {
					return false
				}
			}
			return true
		})
		return ok
	}
	consumertest.Eventually(t, 30*time.Second, "a warn line for a send answered 429", func() bool {
		_, ok := run.record(func(r map[string]any) bool {
			id, _ := r["outbox_id"].(string)
			e, _ := r["err"].(string)
			return r["level"] == "WARN" && id != "" && r["sink"] == webhook.NameDefault && r["attempt"] == float64(1) && e != "" && r["next"] == "retry"
		})
		return ok
	})
	consumertest.Eventually(t, 30*time.Second, "a summary with 3 applied and 3 queued", func() bool {
		return summary(map[string]float64{"applied": 3, "sent": 0, "outbox_queued": 3, "outbox_review": 0})
	})
	dest.FailWith(0)
	consumertest.Eventually(t, 30*time.Second, "a summary with 3 sent and none queued", func() bool {
		return summary(map[string]float64{"applied": 3, "sent": 3, "send_failed": 0, "outbox_queued": 0, "outbox_review": 0})
	})
	if code := run.stop(t); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, run.stderr)
	}
}
