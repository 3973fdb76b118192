package main

import (
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/service"
)

// advise says a refusal of the service (its *service.StepError) where the
// service cannot, naming other commands, with the exit code of a usage
// error where the flags are at fault (a *service.ConfigError, said in
// runNames' words by the service). Only a step error of the service itself
// is advised: a partition's, inside RunPartitions' error, was advised by
// its own run.
func (f *consumeFlags) advise(cfg service.Config, err error) error {
	st, ok := err.(*service.StepError) //nolint:errorlint // the service's own, not a wrapped one
	if !ok {
		return configUsage(err)
	}
	switch st.Step {
	case service.StepSQL:
		return sqlUsage(err)
	case service.StepRun:
		return explainRunError(err, byteSize(cfg.Ledger.MaxSizeBytes))
	}
	return configUsage(err)
}

// explainRunError says a full database in the command line's terms: the
// cap of --db-max-size reached while the disk has room is not "disk full".
func explainRunError(err error, maxSize byteSize) error {
	var capErr *ledger.MaxSizeError
	if !errors.As(err, &capErr) {
		return err
	}
	return fmt.Errorf("the database reached --db-max-size %s while its disk has room: raise --db-max-size, or prune it (jetledger ledger prune); nothing of the failed batch was acked, so it is applied after the restart (%w)",
		maxSize, err)
}
