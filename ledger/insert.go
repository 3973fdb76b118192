package ledger

import (
	"fmt"
	"math/bits"
	"regexp"
	"strings"
	"sync"
)

// Insert describes rows a handler adds with Tx.InsertLater: the ledger
// inserts the rows of every message applied in a batch with a few
// multi-row statements after the batch's handlers, in the batch
// transaction, instead of one statement per message. For rows that nothing
// reads back during the batch, such as an event log.
type Insert struct {
	Table   string
	Columns []string
	// OnConflict, if set, is the upsert clause after "ON CONFLICT", such as
	// "(message_id) DO UPDATE SET data = excluded.data".
	OnConflict string
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// check validates the names; they are quoted, but a plain name is what a
// schema would use.
func (ins *Insert) check() error {
	if !identifier.MatchString(ins.Table) {
		return fmt.Errorf("ledger: insert: table name %q: want letters, digits and underscores", ins.Table)
	}
	if len(ins.Columns) == 0 {
		return fmt.Errorf("ledger: insert into %s: no columns", ins.Table)
	}
	for _, c := range ins.Columns {
		if !identifier.MatchString(c) {
			return fmt.Errorf("ledger: insert into %s: column name %q: want letters, digits and underscores", ins.Table, c)
		}
	}
	if strings.Contains(ins.OnConflict, ";") {
		return fmt.Errorf("ledger: insert into %s: the ON CONFLICT clause must be one clause, without ';'", ins.Table)
	}
	return nil
}

// head is the statement up to VALUES.
func (ins *Insert) head() string {
	return fmt.Sprintf(`INSERT INTO "%s" ("%s") VALUES `, ins.Table, strings.Join(ins.Columns, `", "`))
}

func (ins *Insert) tail() string {
	if ins.OnConflict == "" {
		return ""
	}
	return " ON CONFLICT " + ins.OnConflict
}

// maxRowsPerInsert bounds a multi-row statement; maxParams stays under
// SQLite's limit on bound parameters (32766).
const (
	maxRowsPerInsert = 256
	maxParams        = 32766
)

// insertMany runs head + VALUES + tail for rows of width values each, flat
// in args, a power of two rows per statement: a few statement shapes serve
// every batch, and each is prepared once. A column whose value is the same
// string or integer in every row of a statement (a stream, a subject, a
// time) is bound once for all of them: each bound text is an allocation,
// a copy and a free in the driver.
func insertMany(run func(query string, args []any) error, head, tail string, width int, args []any) error {
	limit := min(maxRowsPerInsert, maxParams/width)
	var bound []any
	for rows := len(args) / width; rows > 0; {
		n := 1 << (bits.Len(uint(min(rows, limit))) - 1) // the largest power of two that fits
		var mask uint64
		mask, bound = foldColumns(args[:n*width], width, bound[:0])
		if err := run(head+valuesList(n, width, mask)+tail, bound); err != nil {
			return err
		}
		args, rows = args[n*width:], rows-n
	}
	return nil
}

// foldColumns finds the columns of rows (width values each) bound once for
// every row: it returns them as a mask, bit c for column c, and appends to
// out the values to bind: those columns' values first, then the others row
// by row, as valuesList numbers the parameters.
func foldColumns(rows []any, width int, out []any) (uint64, []any) {
	var mask uint64
	for c := range width {
		if width <= 64 && len(rows) > width && sameInEveryRow(rows, width, c) {
			mask |= 1 << c
			out = append(out, rows[c])
		}
	}
	for i, v := range rows {
		if mask&(1<<(i%width)) == 0 {
			out = append(out, v)
		}
	}
	return mask, out
}

// sameInEveryRow says whether column c holds one string or one integer in
// every row.
func sameInEveryRow(rows []any, width, c int) bool {
	switch v := rows[c].(type) {
	case string:
		return sameAs(rows, width, c, v)
	case int64:
		return sameAs(rows, width, c, v)
	}
	return false
}

func sameAs[T comparable](rows []any, width, c int, v T) bool {
	for i := c + width; i < len(rows); i += width {
		if w, ok := rows[i].(T); !ok || w != v {
			return false
		}
	}
	return true
}

// valuesKey is a VALUES list's shape.
type valuesKey struct {
	n, width int
	mask     uint64
}

// valuesLists holds the lists built: a batch uses a few shapes again and again.
var valuesLists sync.Map // valuesKey → string

// valuesList is the VALUES list of n rows of width columns. The columns in
// mask take one parameter for every row, ?1, ?2, ... in column order; the
// others one parameter per row, numbered after those, row by row. The first
// row numbers its own; in later rows a bare "?" is one past the largest
// number so far, which is the next.
func valuesList(n, width int, mask uint64) string {
	key := valuesKey{n, width, mask}
	if q, ok := valuesLists.Load(key); ok {
		return q.(string)
	}
	var b strings.Builder
	next := bits.OnesCount64(mask) + 1
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range width {
			if c > 0 {
				b.WriteString(", ")
			}
			switch {
			case mask&(1<<c) != 0:
				fmt.Fprintf(&b, "?%d", bits.OnesCount64(mask&(1<<c-1))+1)
			case r == 0:
				fmt.Fprintf(&b, "?%d", next)
				next++
			default:
				b.WriteByte('?')
			}
		}
		b.WriteByte(')')
	}
	q, _ := valuesLists.LoadOrStore(key, b.String())
	return q.(string)
}

// queued is one Insert's rows in a pass, in the order applied.
type queued struct {
	ins  *Insert
	args []any
}

// InsertLater queues a row of ins for the message being applied. The row
// commits with the message's change, or not at all; it is inserted after
// the batch's handlers have run, so neither this handler nor the others of
// the batch see it. If the multi-row insert fails (a constraint, say), the
// batch is redone with each row inserted at once, so only the message whose
// row failed fails.
func (t *Tx) InsertLater(ins *Insert, values ...any) error {
	if t.done.Load() {
		return ErrTxDone
	}
	if len(values) != len(ins.Columns) {
		return fmt.Errorf("ledger: insert into %s: %d values for %d columns", ins.Table, len(values), len(ins.Columns))
	}
	p := t.p
	if !p.deferInserts {
		if err := ins.check(); err != nil {
			return err
		}
		_, err := t.ExecContext(t.ctx, ins.head()+valuesList(1, len(values), 0)+ins.tail(), values...)
		return err
	}
	for i := range p.inserts {
		if p.inserts[i].ins == ins {
			p.inserts[i].args = append(p.inserts[i].args, values...)
			return nil
		}
	}
	if err := ins.check(); err != nil {
		return err
	}
	p.inserts = append(p.inserts, queued{ins: ins, args: append(make([]any, 0, 64*len(values)), values...)})
	return nil
}

// mark and undo bracket a message's queued rows: a message rolled back to
// its savepoint takes its rows with it.
func (p *pass) mark() []int {
	m := make([]int, len(p.inserts))
	for i, q := range p.inserts {
		m[i] = len(q.args)
	}
	return m
}

func (p *pass) undo(mark []int) {
	p.inserts = p.inserts[:len(mark)]
	for i, n := range mark {
		p.inserts[i].args = p.inserts[i].args[:n]
	}
}

// flushInserts runs the queued rows as a handler's statements: the guard
// holds them to what a handler may do. An error that is not the database's
// (a constraint, a trigger's RAISE) cannot be pinned on one message: the
// caller redoes the batch inserting each row at once.
func (p *pass) flushInserts() error {
	g := p.s.guard
	g.enterHandler()
	defer g.leaveHandler()
	for _, q := range p.inserts {
		ins := q.ins
		err := insertMany(func(query string, args []any) error {
			st, err := p.b.prepare(p.b.quiet, &p.s.handlerStmts, p.b.stmts, query)
			if err == nil {
				_, err = st.ExecContext(p.b.quiet, args...)
			}
			return err
		}, ins.head(), ins.tail(), len(ins.Columns), q.args)
		if err == nil && g.lost.Load() {
			err = fmt.Errorf("%w: a statement rolled back the whole batch", ErrTransactionControl)
		}
		if err != nil {
			return fmt.Errorf("ledger: insert %d rows into %s: %w", len(q.args)/len(ins.Columns), ins.Table, err)
		}
	}
	return nil
}
