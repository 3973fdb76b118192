package changelog

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
)

// A standby that retries says where the trouble is: its own file system
// or disk, or the server. A restore's rename and an open that failed were
// said as "cannot reach its log or its lease" (helper-24's twins), and a
// person looked at the network in vain.
func TestAStandbysRetrySaysWhereTheTroubleIs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the retry's wait returns at once
	for _, c := range []struct {
		err  error
		want string
	}{
		{&os.LinkError{Op: "rename", Old: ".l.db.restore", New: "l.db", Err: fs.ErrNotExist}, "cannot use its ledger file"},
		{&fs.PathError{Op: "open", Path: "l.db", Err: fs.ErrNotExist}, "cannot use its ledger file"},
		{fmt.Errorf("changelog: restore: %w", ledger.ErrIO), "cannot use its ledger file"},
		{fmt.Errorf("changelog: read the log: %w", nats.ErrTimeout), "cannot reach its log or its lease"},
	} {
		var out strings.Builder
		l := &Log{name: "L", log: slog.New(slog.NewTextHandler(&out, nil))}
		l.retry(ctx, c.err)
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%v: said %q, want %q", c.err, out.String(), c.want)
		}
	}
}
