package main

import (
	"github.com/jetledger/jetledger/service"
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
