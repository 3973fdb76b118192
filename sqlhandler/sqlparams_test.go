package sqlhandler

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// openTestStore opens a ledger on a new file with the demo's balances table
// and a table whose column names contain parameter look-alikes.
func openTestStore(tb testing.TB) *ledger.Store {
	tb.Helper()
	st, err := ledger.Open(filepath.Join(tb.TempDir(), "ledger.db"), ledger.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	if _, err := st.DB().ExecContext(context.Background(), demoSchema+
		`; CREATE TABLE IF NOT EXISTS seen ("at:dta" TEXT, v TEXT)`); err != nil {
		tb.Fatal(err)
	}
	return st
}

// TestNewEventsHandlerChecksApplyParams is the regression test of issue point
// 11: a parameter the handler does not bind, such as the typo :dta, compiled
// fine and then failed every message; it must be a usage error at start.
func TestNewEventsHandlerChecksApplyParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		apply   string
		wantBad []string // nil: accepted
	}{
		{name: "typo", apply: `INSERT INTO balances VALUES (json_extract(:dta, '$.a'), 1)`, wantBad: []string{":dta"}},
		{name: "wrong case", apply: `INSERT INTO balances VALUES (:Data, 1)`, wantBad: []string{":Data"}},
		{name: "positional", apply: `INSERT INTO balances VALUES (?, ?2)`, wantBad: []string{"?", "?2"}},
		{name: "dollar number", apply: `INSERT INTO balances VALUES ($1, 1)`, wantBad: []string{"$1"}},
		{name: "tcl suffix", apply: `INSERT INTO balances VALUES ($data::x, $seq(y))`, wantBad: []string{"$data::x", "$seq(y)"}},
		{name: "second statement", apply: `INSERT INTO seen VALUES (:msg_id, :data); INSERT INTO seen VALUES (:subjct, :seq)`, wantBad: []string{":subjct"}},
		{name: "demo", apply: demoApply},
		{name: "every form the driver binds", apply: `INSERT INTO seen VALUES (:msg_id || @subject, $seq || #data)`},
		{name: "in a string", apply: `INSERT INTO seen VALUES ('10:30 :dta ?', :data)`},
		{name: "in comments", apply: "INSERT INTO seen VALUES (:data, /* :dta ? */ :seq) -- :dta"},
		{name: "in quoted identifiers", apply: "INSERT INTO seen (\"at:dta\", [v]) SELECT `at:dta`, [at:dta] FROM seen WHERE v = :data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openTestStore(t)
			_, err := New(context.Background(), st, Config{Apply: tt.apply})
			if tt.wantBad == nil {
				if err != nil {
					t.Fatalf("New: %v, want accepted", err)
				}
				return
			}
			var check *CheckError
			var unbound *UnboundParamError
			if !errors.As(err, &check) || !errors.Is(err, ErrApplyInvalid) || !errors.As(err, &unbound) {
				t.Fatalf("New: %v, want a *CheckError (ErrApplyInvalid) naming %v", err, tt.wantBad)
			}
			if !slices.Equal(unbound.Params, tt.wantBad) {
				t.Fatalf("unbound parameters %q, want %q", unbound.Params, tt.wantBad)
			}
		})
	}
}

// TestApplyParamsBind runs every form the check accepts through handle, so
// applyParams cannot drift from the arguments handle binds.
func TestApplyParamsBind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openTestStore(t)
	apply := `INSERT INTO seen VALUES (:msg_id || '|' || @subject || '|' || $seq, json_extract(#data, '$.v'))`
	h, err := New(ctx, st, Config{Apply: apply})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: "m1", Stream: "S", Sequence: 7, Subject: "ev.a", Data: []byte(`{"v":"x"}`)}}, h.Handle, ledger.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != ledger.Applied {
		t.Fatalf("outcome %v, err %v; want applied", res[0].Outcome, res[0].Err)
	}
	var got, v string
	if err := st.DB().QueryRowContext(ctx, `SELECT "at:dta", v FROM seen`).Scan(&got, &v); err != nil {
		t.Fatal(err)
	}
	if got != "m1|ev.a|7" || v != "x" {
		t.Fatalf("row (%q, %q), want (m1|ev.a|7, x)", got, v)
	}
}

func TestSQLParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sql  string
		want []string
	}{
		{name: "none", sql: `SELECT 1`},
		{name: "named forms", sql: `SELECT :a, @b, $c, #d`, want: []string{":a", "@b", "$c", "#d"}},
		{name: "each once in order", sql: `SELECT :b, :a, :b`, want: []string{":b", ":a"}},
		{name: "positional", sql: `SELECT ?, ?12, ?`, want: []string{"?", "?12"}},
		{name: "positional ends at a non-digit", sql: `SELECT ?1a`, want: []string{"?1"}},
		{name: "dollar number", sql: `SELECT $1`, want: []string{"$1"}},
		{name: "tcl separators", sql: `SELECT $a::b::c, :x::y`, want: []string{"$a::b::c", ":x::y"}},
		{name: "tcl suffix", sql: `SELECT $a(b::c), $d(e)f`, want: []string{"$a(b::c)", "$d(e)"}},
		{name: "unclosed tcl suffix", sql: `SELECT $a(b c), $d(e`},
		{name: "single colon ends the name", sql: `SELECT :a:b`, want: []string{":a", ":b"}},
		{name: "prefix alone is no parameter", sql: `SELECT : , @ , $(x)`},
		{name: "dollar inside a name", sql: `SELECT :a$b, abc$def`, want: []string{":a$b"}},
		{name: "utf-8 name", sql: `SELECT :é1`, want: []string{":é1"}},
		{name: "string", sql: `SELECT '10:30 @x $y ?', :a`, want: []string{":a"}},
		{name: "string with doubled quote", sql: `SELECT 'it''s :no', :a`, want: []string{":a"}},
		{name: "unterminated string", sql: `SELECT ':no`},
		{name: "blob", sql: `SELECT x'0a', X'BEEF', :a`, want: []string{":a"}},
		{name: "x is an identifier", sql: `SELECT x, :a`, want: []string{":a"}},
		{name: "double-quoted identifier", sql: `SELECT "a:b"""":c", :a`, want: []string{":a"}},
		{name: "bracket identifier", sql: `SELECT [a:b], :a`, want: []string{":a"}},
		{name: "backtick identifier", sql: "SELECT `a:b``:c`, :a", want: []string{":a"}},
		{name: "line comment", sql: "SELECT :a -- :no\n, :b", want: []string{":a", ":b"}},
		{name: "line comment at the end", sql: `SELECT :a -- :no`, want: []string{":a"}},
		{name: "block comment", sql: `SELECT /* :no ? */ :a /**/`, want: []string{":a"}},
		{name: "block comment needs its own star", sql: `SELECT /*/ :no */ :a`, want: []string{":a"}},
		{name: "unterminated block comment", sql: `SELECT :a /* :no`, want: []string{":a"}},
		{name: "minus is not a comment", sql: `SELECT - -:a`, want: []string{":a"}},
		{name: "multi-statement", sql: "INSERT INTO t VALUES (:a); -- :no\nUPDATE t SET v = @b WHERE ';' = :c;", want: []string{":a", "@b", ":c"}},
		{name: "number swallows what follows", sql: `SELECT 1$x, 1.$y, 1_0.5e3$z, 0x1f$w, :a`, want: []string{":a"}},
		{name: "number then a parameter", sql: `SELECT 1:a, 1.5@b`, want: []string{":a", "@b"}},
		{name: "BOM is space", sql: "\xef\xbb\xbf$a", want: []string{"$a"}},
		{name: "NUL ends the text", sql: "SELECT :a\x00, :b", want: []string{":a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sqlParams(tt.sql); !slices.Equal(got, tt.want) {
				t.Fatalf("sqlParams(%q) = %q, want %q", tt.sql, got, tt.want)
			}
		})
	}
}

func TestClosestParam(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, param, want string
	}{
		{name: "dropped letter", param: ":dta", want: ":data"},
		{name: "swapped letters", param: ":sqe", want: ":seq"},
		{name: "case", param: ":DATA", want: ":data"},
		{name: "keeps the prefix", param: "@msgid", want: "@msg_id"},
		{name: "short for", param: ":sub", want: ":subject"},
		{name: "tcl form", param: "$data::x", want: "$data"},
		{name: "unrelated", param: ":payload"},
		{name: "too short to guess", param: ":d"},
		{name: "positional", param: "?4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := closestParam(tt.param); got != tt.want {
				t.Fatalf("closestParam(%q) = %q, want %q", tt.param, got, tt.want)
			}
		})
	}
}

// FuzzSQLParams reads arbitrary text: no panic, and every parameter it
// returns is in the text, once.
func FuzzSQLParams(f *testing.F) {
	f.Add(demoApply)
	f.Add("SELECT '10:30', :a -- :dta\n/* @b */ [c:d] \"e:f\" `g:h` x'0a'")
	f.Add("SELECT $a::b(c), ?, ?7, #d; SELECT :e")
	f.Add("SELECT 1.$x, 0x1f$y, \xef\xbb\xbf$z, :a\x00:b")
	f.Fuzz(func(t *testing.T, sql string) {
		params := sqlParams(sql)
		for i, p := range params {
			if p == "" || !strings.Contains(sql, p) {
				t.Fatalf("parameter %q is not in the text", p)
			}
			if slices.Contains(params[:i], p) {
				t.Fatalf("parameter %q returned twice", p)
			}
		}
	})
}
