// Package sqlhandler is the built-in handler of jetledger run: it records
// every message in an events table of the ledger and runs the user's SQL
// (Config.Apply) for it in the batch's transaction, with the message bound
// as :msg_id, :subject, :seq and :data. Config.Schema creates the tables
// Apply uses.
//
// New runs the schema on the ledger and checks Apply before anything is
// consumed: SQL that does not compile, a statement the ledger owns (BEGIN,
// a fixed pragma) or a parameter the handler does not bind is a
// *CheckError (ErrSchema, ErrApplyInvalid; an *UnboundParamError names
// the parameter and the closest bound one), while the ledger file's own
// condition (ledger.ErrBusy, ErrFull, ...) is a *ConditionError matching it.
// The messages name the Config fields (Config.Apply, Config.Schema), or the
// settings as Config.Names says (a command line's flags). Check does
// the same on a scratch copy of a ledger file's schema, creating nothing.
// A payload Apply reads that is not JSON is dead-lettered with ErrNotJSON,
// its reason naming Apply as Config.Names says.
//
//	h, err := sqlhandler.New(ctx, st, sqlhandler.Config{
//		Schema: `CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`,
//		Apply: `INSERT INTO balances VALUES (json_extract(:data, '$.account'), json_extract(:data, '$.amount'))
//			ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`,
//	})
//	if err != nil {
//		return err
//	}
//	cons, err := consumer.New(ctx, js, st, consumer.Config{Stream: "EVENTS", Handler: h.Handle, ...})
package sqlhandler
