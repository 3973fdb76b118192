package sqlhandler

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

// The payload is checked for JSON only when --apply fails on it: an --apply
// that does not read the payload applies one that is not JSON, and the
// events row is stamped with the ledger's processed_at.
func TestApplyThatDoesNotReadThePayloadTakesAnyPayload(t *testing.T) {
	ctx := context.Background()
	st := openHandlerStore(t, `CREATE TABLE counts (subject TEXT PRIMARY KEY, n INTEGER NOT NULL)`)
	h, err := New(ctx, st, Config{Apply: `INSERT INTO counts VALUES (:subject, 1) ON CONFLICT (subject) DO UPDATE SET n = n + 1`})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "a", Stream: "S", Sequence: 1, Subject: "ping", Data: []byte("not json")}},
		h.Handle, ledger.Budget{})
	if err != nil || res[0].Outcome != ledger.Applied {
		t.Fatalf("outcome %+v, err %v; want applied", res, err)
	}
	var n, stamped int
	if err := st.DB().QueryRowContext(ctx, `SELECT (SELECT n FROM counts WHERE subject = 'ping'),
		(SELECT count(*) FROM events e JOIN processed_messages p USING (message_id) WHERE e.applied_at = p.processed_at)`).Scan(&n, &stamped); err != nil {
		t.Fatal(err)
	}
	if n != 1 || stamped != 1 {
		t.Fatalf("count = %d, events rows stamped with processed_at = %d; want 1 and 1", n, stamped)
	}
}

func openHandlerStore(t *testing.T, schema string) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(schema); err != nil {
		t.Fatal(err)
	}
	return st
}

// An --apply that does not read the payload takes one that is not JSON,
// and when it fails for a reason that passes (here a foreign key to a row
// created later; a batch deadline overrun is another) the message is tried
// again as a JSON one is, not dead-lettered for its payload's form.
func TestApplyWithoutDataRetriesAPayloadThatIsNotJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openHandlerStore(t, `CREATE TABLE accounts (id TEXT PRIMARY KEY);
		CREATE TABLE pings (account TEXT NOT NULL REFERENCES accounts (id), msg TEXT PRIMARY KEY)`)
	h, err := New(ctx, st, Config{Apply: `INSERT INTO pings VALUES (:subject, :msg_id)`})
	if err != nil {
		t.Fatal(err)
	}
	batch := []ledger.Delivery{
		{MessageID: "json", Stream: "S", Sequence: 1, Subject: "acct-1", Data: []byte(`{"ping":1}`), Delivered: 1},
		{MessageID: "text", Stream: "S", Sequence: 2, Subject: "acct-1", Data: []byte("ping"), Delivered: 1},
	}
	res, err := st.ApplyBatch(ctx, batch, h.Handle, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	var term *consumer.TermError
	if res[0].Outcome != ledger.Failed || errors.As(res[0].Err, &term) {
		t.Fatalf("control: JSON payload before its account exists = %+v, want a retryable failure", res[0])
	}
	if res[1].Outcome != ledger.Failed || errors.As(res[1].Err, &term) {
		t.Errorf("non-JSON payload --apply does not read, before its account exists = %v (%v): Term, so dead-lettered at once; want retryable as the JSON one",
			res[1].Outcome, res[1].Err)
	}
	// The retry the non-JSON message does not get would have applied it.
	if _, err := st.DB().Exec(`INSERT INTO accounts VALUES ('acct-1')`); err != nil {
		t.Fatal(err)
	}
	batch[0].Delivered, batch[1].Delivered = 2, 2
	if res, err = st.ApplyBatch(ctx, batch, h.Handle, ledger.Budget{}); err != nil || res[0].Outcome != ledger.Applied || res[1].Outcome != ledger.Applied {
		t.Fatalf("retry once the account exists = %+v, %v; want both applied", res, err)
	}
}

// SQLite reads a text argument's JSON only up to its first NUL: a payload
// of one JSON document, a NUL and more would be applied by --apply as the
// first document, the rest silently ignored. It is not JSON: dead-lettered,
// with its whole payload kept.
func TestPayloadWithANULIsDeadLettered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openHandlerStore(t, demoSchema)
	h, err := New(ctx, st, Config{Apply: demoApply})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("{\"account\":\"a\",\"amount\":5}\x00{\"account\":\"a\",\"amount\":1000}")
	res, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "nul", Stream: "S", Sequence: 1, Subject: "ev", Data: data, Delivered: 1}},
		h.Handle, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	var amount int
	if err := st.DB().QueryRow(`SELECT coalesce((SELECT amount FROM balances WHERE account = 'a'), 0)`).Scan(&amount); err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome == ledger.Applied {
		t.Errorf("payload %q (not JSON) was applied as its part before the NUL: balance %d; want a Term failure (dead letter)", data, amount)
	}
}

// New refuses a nil store, and names an unbound parameter and the bound one
// it was probably meant to be, in the message New returns.
func TestNewErrors(t *testing.T) {
	t.Parallel()
	if _, err := New(context.Background(), nil, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil store: %v, want ErrInvalidConfig", err)
	}
	st := openHandlerStore(t, demoSchema)
	_, err := New(context.Background(), st, Config{Apply: `INSERT INTO balances VALUES (json_extract(:dta, '$.a'), 1)`})
	var unbound *UnboundParamError
	if !errors.As(err, &unbound) || unbound.Closest(unbound.Params[0]) != ":data" {
		t.Fatalf("New: %v, want an *UnboundParamError suggesting :data", err)
	}
	const want = "sqlhandler: Config.Apply uses :dta (did you mean :data?), which is not bound: the parameters are :msg_id, :subject, :seq and :data"
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
}

// A Schema that cannot run because another process holds the ledger's
// writer is the ledger's condition, not bad SQL: a *ConditionError
// naming the field, matching ledger.ErrBusy, and no *CheckError.
func TestSchemaBlockedByAWriterIsACondition(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(file, ledger.Config{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	other, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // the test's own writer
	_, err = New(t.Context(), st, Config{Schema: "CREATE TABLE IF NOT EXISTS t (x)", SchemaName: "s.sql"})
	var cond *ConditionError
	if !errors.As(err, &cond) || cond.Field != "Schema" || cond.Name != "s.sql" || !errors.Is(err, ledger.ErrBusy) || errors.As(err, new(*CheckError)) {
		t.Fatalf("New beside another writer: %v, want a *ConditionError (Schema, s.sql) matching ledger.ErrBusy", err)
	}
}

// Names["Apply"] is what the dead-letter reason of a payload that is not JSON
// and an unbound parameter call Apply (run says --apply), and each still
// matches its sentinel; the default names the Config field.
func TestNamesNameApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openHandlerStore(t, demoSchema)
	for _, tt := range []struct {
		name, want string
		names      map[string]string
	}{{"", "Config.Apply", nil}, {"--apply", "--apply", map[string]string{"Apply": "--apply"}}, {"APPLY", "APPLY", map[string]string{"Apply": "APPLY"}}} {
		_, err := New(ctx, st, Config{Apply: `INSERT INTO balances VALUES (json_extract(:dta, '$.a'), 1)`, Names: tt.names})
		want := tt.want + " uses :dta (did you mean :data?), which is not bound: the parameters are :msg_id, :subject, :seq and :data"
		var unbound *UnboundParamError
		if !errors.As(err, &unbound) || unbound.Error() != want {
			t.Errorf("Names[Apply] %q: unbound parameter %v, want %q", tt.name, err, want)
		}
		h, err := New(ctx, st, Config{Apply: demoApply, Names: tt.names})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.ApplyBatch(ctx, []ledger.Delivery{
			{MessageID: "nul" + tt.want, Stream: "S", Sequence: 1, Subject: "ev", Data: []byte("{}\x00"), Delivered: 1},
			{MessageID: "bad" + tt.want, Stream: "S", Sequence: 2, Subject: "ev", Data: []byte("{"), Delivered: 1},
		}, h.Handle, ledger.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		reason := "payload is not valid JSON, and " + tt.want + " reads it"
		for _, r := range res {
			var term *consumer.TermError
			if !errors.As(r.Err, &term) || !errors.Is(r.Err, ErrNotJSON) || !strings.HasPrefix(term.Err.Error(), reason) {
				t.Errorf("Names[Apply] %q: %v, want a Term failure matching ErrNotJSON, reason starting %q", tt.name, r.Err, reason)
			}
		}
		if got := res[0].Err.(*consumer.TermError).Err.Error(); got != reason {
			t.Errorf("Names[Apply] %q: reason of a payload with a NUL %q, want %q", tt.name, got, reason)
		}
	}
}

// Names name Schema and Apply as the caller does (run: --schema, --apply),
// the message then the caller's own; without them the message names the
// Config fields behind the package's name.
func TestNamesNameTheFields(t *testing.T) {
	t.Parallel()
	busy := fmt.Errorf("locked: %w", ledger.ErrBusy)
	bad := errors.New("no such table: nowhere")
	flags := map[string]string{"Schema": "--schema", "Apply": "--apply"}
	tests := []struct {
		name       string
		err        func(names map[string]string) error
		want, bare string // with flags; without names
	}{
		{"schema", func(n map[string]string) error {
			return &CheckError{Kind: ErrSchema, Name: "s.sql", Err: bad, Names: n}
		},
			"--schema s.sql: no such table: nowhere", "sqlhandler: Config.Schema s.sql: no such table: nowhere"},
		{"apply", func(n map[string]string) error { return &CheckError{Kind: ErrApplyInvalid, Err: bad, Names: n} },
			"--apply does not compile: no such table: nowhere (tables it uses must exist: create them with --schema)",
			"sqlhandler: Config.Apply does not compile: no such table: nowhere (tables it uses must exist: create them with Config.Schema)"},
		{"unbound", func(n map[string]string) error {
			return &CheckError{Kind: ErrApplyInvalid, Err: &UnboundParamError{Params: []string{"?1"}, Name: "--apply"}, Names: n}
		},
			"--apply uses ?1, which is not bound (positional parameters never are): the parameters are :msg_id, :subject, :seq and :data",
			"sqlhandler: Config.Apply uses ?1, which is not bound (positional parameters never are): the parameters are :msg_id, :subject, :seq and :data"},
		{"schema condition", func(n map[string]string) error {
			return &ConditionError{Field: "Schema", Name: "s.sql", Err: busy, Names: n}
		},
			"--schema s.sql could not run: " + busy.Error() + " (the ledger, not the SQL: another process may hold its writer)",
			"sqlhandler: Config.Schema s.sql could not run: " + busy.Error() + " (the ledger, not the SQL: another process may hold its writer)"},
		{"apply condition", func(n map[string]string) error { return &ConditionError{Field: "Apply", Err: busy, Names: n} },
			"--apply could not be checked: " + busy.Error() + " (the ledger, not the SQL: another process may hold its writer)",
			"sqlhandler: Config.Apply could not be checked: " + busy.Error() + " (the ledger, not the SQL: another process may hold its writer)"},
	}
	for _, tt := range tests {
		if got := tt.err(flags).Error(); got != tt.want {
			t.Errorf("%s: with names\n got %q\nwant %q", tt.name, got, tt.want)
		}
		if got := tt.err(nil).Error(); got != tt.bare {
			t.Errorf("%s: without names\n got %q\nwant %q", tt.name, got, tt.bare)
		}
	}
}

// New and Check say their refusals in Config.Names' words, and keep what
// they are.
func TestConfigNamesNameTheRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openHandlerStore(t, demoSchema)
	names := map[string]string{"Schema": "--schema", "Apply": "--apply"}
	_, err := New(ctx, st, Config{Apply: "INSERT INTO nowhere VALUES (:data)", Names: names})
	want := "--apply does not compile: "
	if !errors.Is(err, ErrApplyInvalid) || !errors.As(err, new(*CheckError)) || !strings.HasPrefix(err.Error(), want) ||
		!strings.HasSuffix(err.Error(), "create them with --schema)") {
		t.Errorf("New: %v, want a *CheckError (ErrApplyInvalid) saying %q...--schema", err, want)
	}
	err = Check(ctx, filepath.Join(t.TempDir(), "l.db"), Config{Schema: "CREATE TABL x (y)", SchemaName: "s.sql", Names: names})
	if !errors.Is(err, ErrSchema) || !strings.HasPrefix(err.Error(), "--schema s.sql: ") {
		t.Errorf("Check: %v, want a *CheckError (ErrSchema) saying --schema s.sql", err)
	}
	_, err = New(ctx, st, Config{Apply: "SELECT :dta", Names: names})
	var unbound *UnboundParamError
	if !errors.As(err, &unbound) || unbound.Name != "--apply" || !strings.HasPrefix(err.Error(), "--apply uses :dta") {
		t.Errorf("New with Names: %v, want --apply named", err)
	}
}
