package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
)

var quiet = slog.New(slog.DiscardHandler)

// A failing check turns the answer 503 with its state and no error text;
// a round answers until Refresh has passed.
func TestHandlerStatesAndRefresh(t *testing.T) {
	t.Parallel()
	fail := ledger.ErrFull
	h, err := health.New(health.Config{Refresh: time.Hour, Logger: quiet},
		health.Probe{Name: "database", Check: func(context.Context) error { return fmt.Errorf("/secret/path: %w", fail) }},
		health.Store(func() error { return nil }, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, health.Report, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		body := rec.Body.String()
		var rep health.Report
		if err := json.Unmarshal([]byte(body), &rep); err != nil {
			t.Fatal(err)
		}
		return rec.Code, rep, body
	}
	code, rep, body := get()
	if code != http.StatusServiceUnavailable || rep.Healthy || rep.Checks["database"] != health.StateDiskFull || rep.Checks["store"] != health.StateOK {
		t.Fatalf("got %d %+v", code, rep)
	}
	if want := `{"healthy":false,"checks":{"database":"disk_full","store":"ok"}}` + "\n"; body != want {
		t.Fatalf("body %q, want %q", body, want)
	}
	fail = nil
	if code, rep, _ := get(); code != http.StatusServiceUnavailable || rep.Checks["database"] != health.StateDiskFull {
		t.Fatalf("within Refresh: %d %+v, want the last round", code, rep)
	}
}

func TestStateOf(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		nil: health.StateOK,
		fmt.Errorf("x: %w", health.ErrWriteFailed): health.StateWriteFailed,
		health.ErrNotConnected:                     health.StateNotConnected,
		health.ErrConsumerUnavailable:              health.StateUnavailable,
		ledger.ErrAtMaxSize:                        health.StateAtMaxSize,
		ledger.ErrFull:                             health.StateDiskFull,
		ledger.ErrReadOnly:                         health.StateReadOnly,
		errors.New("other"):                        health.StateFailed,
	} {
		got := health.StateOf(err)
		if got != want || !slices.Contains(health.States, got) {
			t.Errorf("StateOf(%v) = %q, want %q", err, got, want)
		}
	}
}

type status nats.Status

func (s status) Status() nats.Status { return nats.Status(s) }

func TestProbes(t *testing.T) {
	t.Parallel()
	if err := health.NATS(status(nats.RECONNECTING)).Check(t.Context()); !errors.Is(err, health.ErrNotConnected) {
		t.Errorf("nats reconnecting: %v", err)
	}
	if err := health.NATS(status(nats.CONNECTED)).Check(t.Context()); err != nil {
		t.Errorf("nats connected: %v", err)
	}
	if err := health.Store(func() error { return errors.New("boom") }, t.TempDir()).Check(t.Context()); !errors.Is(err, health.ErrWriteFailed) {
		t.Errorf("store fault: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	for _, tc := range []struct {
		name   string
		cfg    health.Config
		probes []health.Probe
	}{
		{"negative refresh", health.Config{Refresh: -time.Second}, nil},
		{"negative timeout", health.Config{ProbeTimeout: -time.Second}, nil},
		{"no name", health.Config{}, []health.Probe{{Check: ok}}},
		{"no check", health.Config{}, []health.Probe{{Name: "x"}}},
		{"twice", health.Config{}, []health.Probe{{Name: "x", Check: ok}, {Name: "x", Check: ok}}},
	} {
		if _, err := health.New(tc.cfg, tc.probes...); !errors.Is(err, health.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tc.name, err)
		}
	}
}

// A ledger with rows that need a person answers 200, healthy, with the
// check "attention" and what needs doing per kind; settled, the attention
// goes.
func TestAttentionIsHealthyAndSaysWhat(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(t.TempDir()+"/l.db", ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := health.New(health.Config{Refresh: time.Nanosecond, Logger: quiet}, health.Attention(st))
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, health.Report) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var rep health.Report
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return rec.Code, rep
	}
	if code, rep := get(); code != http.StatusOK || rep.Checks["attention"] != health.StateOK || len(rep.Attention) != 0 {
		t.Fatalf("an empty ledger: %d %+v", code, rep)
	}
	ctx := context.Background()
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "d", Stream: "S", Sequence: 3, Subject: "ev", Reason: "bad", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	code, rep := get()
	if code != http.StatusOK || !rep.Healthy || rep.Checks["attention"] != health.StateAttention || len(rep.Attention) != 1 ||
		rep.Attention[0].Kind != ledger.AttentionDeadLetter || rep.Attention[0].Count != 1 || rep.Attention[0].Do == "" || rep.Attention[0].Oldest.IsZero() {
		t.Fatalf("a dead letter: %d %+v", code, rep)
	}
	dls, _ := st.DeadLetters(ctx, 0)
	if err := st.DiscardDeadLetter(ctx, dls[0].ID); err != nil {
		t.Fatal(err)
	}
	if code, rep := get(); code != http.StatusOK || rep.Checks["attention"] != health.StateOK || len(rep.Attention) != 0 {
		t.Fatalf("settled: %d %+v", code, rep)
	}
}
