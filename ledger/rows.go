package ledger

import (
	"database/sql"
	"fmt"
)

// scanner is a row being read: *sql.Row or *sql.Rows.
type scanner interface{ Scan(...any) error }

// collect reads every row of a query with scan, closing the rows; what
// names the listing in errors.
func collect[T any](what string, rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, fmt.Errorf("ledger: %s: %w", what, interpret(err))
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: %s: %w", what, interpret(err))
	}
	return out, nil
}
