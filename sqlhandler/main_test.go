package sqlhandler

// The demo's schema and --apply (cmd/jetledger demo.go), which the tests
// use as a typical handler.
const (
	demoSchema = `CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`
	demoApply  = `INSERT INTO balances (account, amount)
		VALUES (json_extract(:data, '$.account'), json_extract(:data, '$.amount'))
		ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`
)
