package main

import (
	"errors"

	"github.com/jetledger/jetledger/service"
	"github.com/jetledger/jetledger/sqlhandler"
)

// advise says a refusal of the service (its *service.StepError) with the
// exit code of a usage error where the flags are at fault: bad SQL, or a
// *service.ConfigError, said in runNames' words by the service. Only a
// step error of the service itself is advised: a partition's, inside
// RunPartitions' error, was advised by its own run.
func advise(err error) error {
	if st, ok := err.(*service.StepError); ok && st.Step == service.StepSQL { //nolint:errorlint // the service's own, not a wrapped one
		return sqlUsage(err)
	}
	return configUsage(err)
}

// sqlUsage is err a usage error (exit 2) if it is bad SQL: a
// *sqlhandler.CheckError. Anything else (the ledger's condition, a stop)
// stays a runtime error.
func sqlUsage(err error) error {
	if errors.As(err, new(*sqlhandler.CheckError)) {
		return usageError{err}
	}
	return err
}
