package consumertest

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/jetledger/jetledger/consumer/jsretry"
)

// WaitLog is a slog.Handler that keeps what a logger said it waited for
// (jsretry's waiting_for) and every record, for tests of start-up waits.
type WaitLog struct {
	mu      sync.Mutex
	waiting []string
	lines   []string
}

func (w *WaitLog) Enabled(context.Context, slog.Level) bool { return true }
func (w *WaitLog) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *WaitLog) WithGroup(string) slog.Handler            { return w }

// Handle keeps r.
func (w *WaitLog) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	w.mu.Lock()
	defer w.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		if a.Key == jsretry.KeyWaitingFor {
			w.waiting = append(w.waiting, a.Value.String())
		}
		return true
	})
	w.lines = append(w.lines, line)
	return nil
}

// WaitedFor reports whether the logger said it waited for call.
func (w *WaitLog) WaitedFor(call string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.waiting {
		if c == call {
			return true
		}
	}
	return false
}

// Waits is how many times the logger said it waited.
func (w *WaitLog) Waits() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiting)
}

// String is every record, a line each, for a failure's message.
func (w *WaitLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}
