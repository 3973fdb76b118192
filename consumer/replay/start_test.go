package replay

import (
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
)

// Start's refusals are *ConfigError in the caller's words; Since is a
// duration back from now or an RFC 3339 time.
func TestStartFrom(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	flags := map[string]string{"Consumer": "run", "FromSeq": "--from-seq", "Since": "--since", "ToSeq": "--to-seq",
		"HaveSink": "--webhook (or --effects-subject)", "NoEffects": "--no-effects"}
	for _, tt := range []struct {
		name    string
		start   Start
		want    consumer.ReplayFrom
		wantErr string
	}{
		{"the stream's start", Start{}, consumer.ReplayFrom{}, ""},
		{"from a sequence", Start{FromSeq: 4, ToSeq: 4}, consumer.ReplayFrom{Seq: 4}, ""},
		{"since a duration", Start{Since: "1d"}, consumer.ReplayFrom{Time: now.Add(-24 * time.Hour)}, ""},
		{"since a time", Start{Since: "2026-11-30T00:00:00Z"}, consumer.ReplayFrom{Time: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}, ""},
		{"both", Start{FromSeq: 1, Since: "1h"}, consumer.ReplayFrom{}, "give --from-seq or --since, not both"},
		{"a sink and none", Start{HaveSink: true, NoEffects: true}, consumer.ReplayFrom{},
			"give --webhook (or --effects-subject) or --no-effects, not both: --no-effects says run has no effects"},
		{"past the end", Start{FromSeq: 5, ToSeq: 2}, consumer.ReplayFrom{}, "--from-seq 5 is past --to-seq 2"},
		{"a negative duration", Start{Since: "-1h"}, consumer.ReplayFrom{}, `--since "-1h": want a positive duration`},
		{"neither", Start{Since: "yesterday"}, consumer.ReplayFrom{},
			`--since "yesterday": want a duration (24h) or an RFC 3339 time (2026-11-30T00:00:00Z)`},
	} {
		tt.start.Names = flags
		got, err := tt.start.From(now)
		var ce *ConfigError
		switch {
		case tt.wantErr == "" && (err != nil || !got.Time.Equal(tt.want.Time) || got.Seq != tt.want.Seq):
			t.Errorf("%s: %+v, %v; want %+v", tt.name, got, err, tt.want)
		case tt.wantErr != "" && (!errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Reason != tt.wantErr):
			t.Errorf("%s: %v, want %q", tt.name, err, tt.wantErr)
		}
		if r, ok := Say(err, nil); ok != (tt.wantErr != "") || r != tt.wantErr {
			t.Errorf("%s: Say = %q, %t", tt.name, r, ok)
		}
	}
	if (Start{NoEffects: true}).Decided() == (Start{}).Decided() {
		t.Error("Decided does not tell NoEffects from nothing said")
	}
}
