package service

import (
	"context"
	"errors"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/status"
)

// Status is what ReadStatus found: status.Read's report of the consumer
// chosen, and where its names came from.
type Status struct {
	status.Report
	// Chosen is the stream and durable read, and where they came from.
	Chosen Chosen
	// NamesLedger is the ledger the names were chosen from: db, or a
	// partitioned run's first partition's (partition.Ledger).
	NamesLedger string
}

// ReadStatus reads the status (status.Read) of the consumer w names, with
// the ledger at db or, where a partitioned run keeps its ledgers beside db
// (status.LocalPartitions), with every one of those. w's names left out
// are the ones that ledger (the first partition's) records, as Choose
// says. A ledger that does not exist (fs.ErrNotExist) or cannot be read is
// the report's first problem, and the names are w's defaults; a stream or
// durable not found says where its names came from (Chosen.Explain, in
// w.Names' words). Several recorded consumers that fit are an
// *AmbiguousError: which is meant is the caller's to say. js nil reads no
// server. cfg's Stream, Durable, DB and Partitions are set here; ctx
// bounds every call.
func ReadStatus(ctx context.Context, js status.JetStream, db string, w Want, cfg status.Config) (Status, error) {
	cfg.DB, cfg.Partitions = db, status.LocalPartitions(db)
	from := db
	if len(cfg.Partitions) > 0 {
		from = partition.Ledger(db, cfg.Partitions[0])
	}
	var problems []error
	c := w.Defaults()
	st, err := ledger.OpenExisting(from, ledger.Config{Logger: cfg.Logger})
	if err == nil {
		defer st.Close()
		var chosen Chosen
		switch chosen, err = Choose(ctx, st, w); {
		case errors.As(err, new(*AmbiguousError)):
			return Status{}, err
		case err == nil:
			c = chosen
		}
	}
	if err != nil {
		problems = append(problems, err)
	}
	if len(cfg.Partitions) > 0 {
		st = nil // the partitions' ledgers are read instead
	}
	cfg.Stream, cfg.Durable = c.Stream, c.Durable
	r, err := status.Read(ctx, js, st, cfg)
	if err != nil {
		return Status{}, err
	}
	for _, p := range r.Problems {
		problems = append(problems, c.Explain(p, db, w.Names))
	}
	r.Problems = problems
	return Status{Report: r, Chosen: c, NamesLedger: from}, nil
}
