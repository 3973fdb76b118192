package stream_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/stream"
)

// Check refuses what the server would, naming each setting as Names says.
func TestCheckNamesTheSetting(t *testing.T) {
	t.Parallel()
	names := map[string]string{"Name": "--stream", "Subjects": "--subjects", "Limits.MaxAge": "--max-age", "Duplicates": "--duplicate-window"}
	tests := []struct {
		name    string
		cfg     stream.Config
		wantErr error
		want    string // the Reason's start
	}{
		{"fine", stream.Config{Name: "S", Subjects: []string{"s.>"}}, nil, ""},
		{"no name", stream.Config{}, stream.ErrInvalidConfig, "--stream needs a name"},
		{"dotted name", stream.Config{Name: "a.b"}, stream.ErrInvalidConfig, `--stream "a.b": a NATS name`},
		{"long name", stream.Config{Name: strings.Repeat("s", stream.MaxNameLen+1)}, stream.ErrInvalidConfig, "--stream is 256 bytes long"},
		{"bad subject", stream.Config{Name: "S", Subjects: []string{"a..b"}}, stream.ErrInvalidConfig, `--subjects "a..b": not a NATS subject`},
		{"negative window", stream.Config{Name: "S", Duplicates: -time.Second}, stream.ErrInvalidConfig, "--duplicate-window -1s: must not be negative"},
		{"negative bytes", stream.Config{Name: "S", Limits: stream.Limits{MaxBytes: -1}}, stream.ErrInvalidConfig, "Limits.MaxBytes -1"},
		{"six replicas", stream.Config{Name: "S", Limits: stream.Limits{Replicas: 6}}, stream.ErrInvalidConfig, "Limits.Replicas 6: want 1 to 5"},
		{"age under the window", stream.Config{Name: "S", Duplicates: time.Minute, Limits: stream.Limits{MaxAge: time.Second}}, stream.ErrInvalidConfig,
			"--max-age 1s is shorter than the duplicate window 1m0s of the stream --subjects creates: raise --max-age or lower --duplicate-window"},
	}
	for _, tt := range tests {
		tt.cfg.Names = names
		err := tt.cfg.Check()
		if !errors.Is(err, tt.wantErr) {
			t.Fatalf("%s: %v, want %v", tt.name, err, tt.wantErr)
		}
		var ce *stream.ConfigError
		if tt.wantErr != nil && (!errors.As(err, &ce) || !strings.HasPrefix(ce.Reason, tt.want)) {
			t.Errorf("%s: %v, want a *ConfigError starting %q", tt.name, err, tt.want)
		}
	}
}

// A limit given is named by its path in Limits.
func TestLimitsSet(t *testing.T) {
	t.Parallel()
	for l, want := range map[stream.Limits]string{{}: "", {MaxAge: time.Hour}: "MaxAge", {MaxMsgs: 1, Replicas: 3}: "MaxMsgs", {Replicas: 3}: "Replicas"} {
		if got := l.Set(); got != want {
			t.Errorf("%+v: %q, want %q", l, got, want)
		}
	}
}
