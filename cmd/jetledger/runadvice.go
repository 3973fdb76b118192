package main

import (
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/consumer/prune"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/service"
)

// advise says a refusal of the service (its *service.StepError) in the
// flags' terms where the service does not, with the exit code of a usage
// error where the flags are at fault (a *service.ConfigError). Only a step
// error of the service itself is advised: a partition's, inside
// RunPartitions' error, was advised by its own run.
func (f *consumeFlags) advise(cfg service.Config, err error) error {
	st, ok := err.(*service.StepError) //nolint:errorlint // the service's own, not a wrapped one
	if !ok {
		return configUsage(err)
	}
	switch st.Step {
	case service.StepSQL:
		return sqlUsage(err)
	case service.StepNode:
		return nodeAdvice(err, f.Embedded.Listen)
	case service.StepStream:
		return streamAdvice(cfg, err)
	case service.StepConsumer:
		return refusal(cfg.Stream.Name, cfg.Consumer.Durable, cfg.Consumer.Plan.BatchSize, err)
	case service.StepPrune:
		if r := (*service.RetentionError)(nil); errors.As(err, &r) && errors.Is(err, prune.ErrRetentionShort) {
			return retentionShort(r.Retention, r.Stream, r.DuplicateWindow)
		}
	case service.StepRun:
		return explainRunError(err, byteSize(cfg.Ledger.MaxSizeBytes))
	}
	return configUsage(err)
}

// streamAdvice says the stream's refusals: partitioned otherwise than the
// flags say.
func streamAdvice(cfg service.Config, err error) error {
	var share *service.PartitionedError
	var count *service.PartitionCountError
	switch {
	case errors.As(err, &share):
		return fmt.Errorf("stream %s is partitioned into %d: consume it with run --partition I (each partition into its own ledger), or name a partition's durable (--durable %s-p0); one consumer over every partition would apply them all into one ledger, beside the partitions' own",
			share.Stream, share.Partitions, share.Durable)
	case errors.As(err, &count) && count.Have == 0:
		return fmt.Errorf("stream %s is not partitioned (no {{partition(N,…)}} subject mapping): create it with run --subjects … --partitions N, or leave out --partition", count.Stream)
	case errors.As(err, &count) && count.Named:
		return usagef("--partition %d: stream %s has %d partitions, numbered 0 to %d", count.Want, count.Stream, count.Have, count.Have-1)
	case errors.As(err, &count):
		return fmt.Errorf("stream %s has %d partitions, not --partitions %d; a partitioned stream keeps its count (leave out --partitions)", count.Stream, count.Have, count.Want)
	}
	return err
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
