package status

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig: a Config that names no stream or durable while a
// JetStream is given, a partition that is negative or given twice, a
// partition without DB, a ledger given beside Partitions, or a Plan out of
// range (ackwait.Plan.Check).
var ErrInvalidConfig = errors.New("status: invalid config")

// StrayLedgerError is a problem of Read: a ledger on this host of a
// partition that the stream does not have (its partitions were fewer when
// it was made again, or the ledger is of another stream).
type StrayLedgerError struct {
	Ledger     string // the ledger's path
	Partition  int    // the partition its name says
	Stream     string
	Partitions int // how many the stream has
}

func (e *StrayLedgerError) Error() string {
	return fmt.Sprintf("ledger %s is of partition %d, but stream %s has %d partitions", e.Ledger, e.Partition, e.Stream, e.Partitions)
}
