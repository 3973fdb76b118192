package outbox_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox"
)

// Every failed send is a warn line naming the row, the sink, the attempt
// and the error, and what the row does next: retried, sent again with the
// same key, reviewed or failed. Real HTTP answers from the test destination.
func TestEveryFailedSendIsAWarning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		idempotent  bool
		maxAttempts int
		wantNext    string
	}{
		{name: "429 retryable", status: http.StatusTooManyRequests, maxAttempts: 5, wantNext: "retry"},
		{name: "429 on the last attempt", status: http.StatusTooManyRequests, maxAttempts: 1, wantNext: "fail"},
		{name: "400 rejected", status: http.StatusBadRequest, maxAttempts: 5, wantNext: "fail"},
		{name: "500 unknown outcome", status: http.StatusInternalServerError, maxAttempts: 5, wantNext: "review"},
		{name: "500 to an idempotent destination", status: http.StatusInternalServerError, idempotent: true, maxAttempts: 5, wantNext: "retry maybe sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newOutboxEnv(t, tt.idempotent, time.Second)
			e.dest.FailWith(tt.status)
			id := e.enqueue(t, "m1")
			e.run(t, e.dispatcher(t, outbox.Config{MaxAttempts: tt.maxAttempts, Backoff: ackwait.Backoff{Base: time.Hour}}))
			want := map[string]string{"outbox_id": id, "sink": e.sink.Name(), "attempt": "1", "next": tt.wantNext}
			var rec slog.Record
			consumertest.Eventually(t, 10*time.Second, fmt.Sprintf("a warning with %v", want), func() bool {
				var ok bool
				rec, ok = e.logs.find(slog.LevelWarn, want)
				return ok
			})
			var errText string
			rec.Attrs(func(a slog.Attr) bool {
				if a.Key == "err" {
					errText = a.Value.String()
				}
				return true
			})
			if errText == "" {
				t.Fatalf("the warning for the failed send carries no error: %v", rec)
			}
		})
	}
}
