// Package integration holds jetledger's end-to-end tests: real JetStream
// servers, real SQLite files, and the real jetledger binary (built once per
// run with the jetledger_faults tag) started, stopped and SIGKILLed as a
// separate process.
package integration
