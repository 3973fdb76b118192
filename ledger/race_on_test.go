//go:build race

package ledger_test

// raceEnabled: the race detector slows pure-Go SQLite tenfold or more, so
// tests that need volume use less of it.
const raceEnabled = true
