package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue finds a sample in Prometheus text format.
func metricValue(body, series string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// run --metrics serves Prometheus metrics with conventional names and a
// /healthz that checks NATS, the database and the consumer; status shows
// the same state on one screen.
func TestMetricsHealthAndStatus(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	dest := webhooktest.NewDestination(t, false)
	evs := makeEvents(randFor(t), w.pub, 200)
	w.publish(evs)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	run := w.runConsumer(nil, append(webhookArgs(dest), "--metrics", addr)...)
	w.waitDrained(30 * time.Second)
	consumertest.Eventually(t, 10*time.Second, "metrics scraped", func() bool {
		code, body := get(t, "http://"+addr+"/metrics")
		v, _ := metricValue(body, "jetledger_messages_applied_total")
		sent, _ := metricValue(body, `jetledger_outbox_rows{status="sent"}`)
		return code == 200 && v == 200 && sent == 200
	})
	_, body := get(t, "http://"+addr+"/metrics")
	for _, series := range []string{
		"jetledger_messages_duplicate_total", "jetledger_messages_conflict_total", "jetledger_messages_failed_total",
		"jetledger_naks_total", "jetledger_terms_total", "jetledger_dead_letters_total",
		"jetledger_batch_messages_count", "jetledger_batch_commit_seconds_count", "jetledger_batch_ack_seconds_count",
		`jetledger_outbox_rows{status="review"}`, `jetledger_outbox_sends_total{result="sent"}`,
	} {
		if _, ok := metricValue(body, series); !ok {
			t.Errorf("no %s in /metrics", series)
		}
	}
	code, health := get(t, "http://"+addr+"/healthz")
	var h struct {
		Healthy bool              `json:"healthy"`
		Checks  map[string]string `json:"checks"`
	}
	if code != 200 || json.Unmarshal([]byte(health), &h) != nil || !h.Healthy || h.Checks["database"] != "ok" {
		t.Fatalf("/healthz %d: %s", code, health)
	}

	out, code2 := cli(t, "status", "--db", w.db, "--nats", w.srv.ClientURL(), "--stream", stream, "--json",
		"--deadline", "1s", "--buffer-wait", "200ms", "--commit-margin", "300ms", "--ack-margin", "200ms")
	var st struct {
		Stream struct {
			LastSeq uint64 `json:"last_seq"`
		} `json:"stream"`
		Consumer struct {
			Safe       bool `json:"safe"`
			AckPending int  `json:"ack_pending"`
		} `json:"consumer"`
		Ledger struct{ Processed int64 } `json:"ledger"`
		Outbox map[string]int64          `json:"outbox"`
	}
	if code2 != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Stream.LastSeq != 200 || !st.Consumer.Safe ||
		st.Ledger.Processed != 200 || st.Outbox["sent"] != 200 {
		t.Fatalf("status: exit %d\n%s", code2, out)
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// With the default plan the consumer's short AckWait is reported, exit 1.
	out, code2 = cli(t, "status", "--db", w.db, "--nats", w.srv.ClientURL(), "--stream", stream)
	if code2 != 1 || !strings.Contains(out, "UNSAFE") {
		t.Fatalf("status with the default plan: exit %d\n%s", code2, out)
	}
}
