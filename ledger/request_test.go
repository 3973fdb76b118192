package ledger_test

import (
	"errors"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A request the ledger cannot mean is a *ConfigError naming its fields as
// Names says, found before the ledger is opened.
func TestRequestChecks(t *testing.T) {
	t.Parallel()
	flags := map[string]string{"Status": "--status", "Limit": "--limit", "As": "--as", "ExternalID": "--external-id"}
	for _, tt := range []struct {
		name  string
		check func() error
		want  string
	}{
		{"all rows", ledger.Listing{}.Check, ""},
		{"one status", ledger.Listing{Status: ledger.StatusReview, Limit: 5}.Check, ""},
		{"no such status", ledger.Listing{Status: "done", Names: flags}.Check,
			`--status "done": want one of queued, sending, sent, failed, review, cancelled, suppressed`},
		{"negative limit", ledger.Listing{Limit: -1, Names: flags}.Check, "--limit -1: want 0 (all) or more"},
		{"negative limit, a Go program's", ledger.Listing{Limit: -1}.Check, "Limit -1: want 0 (all) or more"},
		{"as failed", ledger.Resolution{As: ledger.StatusFailed}.Check, ""},
		{"as sent", ledger.Resolution{As: ledger.StatusSent, ExternalID: "x"}.Check, ""},
		{"no as", ledger.Resolution{Names: flags}.Check, "--as is required: sent or failed"},
		{"as done", ledger.Resolution{As: "done", Names: flags}.Check, `--as "done": want sent or failed`},
		{"as sent without the id", ledger.Resolution{As: ledger.StatusSent, Names: flags}.Check,
			"--as sent needs --external-id: the destination's id for the item"},
	} {
		err := tt.check()
		var ce *ledger.ConfigError
		if tt.want == "" && err != nil || tt.want != "" && (!errors.Is(err, ledger.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Refusal() != tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
