// Package status reads what `jetledger status` and `jetledger check` show,
// as typed values: the stream (first and last sequence, messages, duplicate
// window), the durable consumer (its AckWait against what an ackwait.Plan
// needs, pending, waiting for ack, redelivered, acked through), the
// ledger's stats and outbox rows per state, and, for a partitioned stream,
// every partition's durable and its ledger when that is on this host.
//
// Read never fails half-way: a part that cannot be read is left nil and
// its error is among Report.Problems, as is the plan's refusal of the
// consumer, so one call says everything that is wrong. Check is the
// check alone, as run does it before it consumes. Report.WriteText writes
// a report as the command shows it, fitted to TextWidth columns.
//
//	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
//	defer cancel()
//	rep, err := status.Read(ctx, js, st, status.Config{Stream: "PAY", Durable: "jetledger",
//		Plan: ackwait.Plan{Deadline: 10 * time.Second}})
//	if err != nil {
//		return err // an invalid Config: nothing was read
//	}
//	for _, p := range rep.Problems {
//		log.Warn("status", "problem", p)
//	}
//	if rep.Consumer != nil && rep.Ledger != nil {
//		fmt.Println(rep.Consumer.Pending, rep.Ledger.DeadLetters, rep.Outbox[ledger.StatusReview])
//	}
//
// A partitioned run keeps a ledger per partition beside its path; read
// them all, summed into Ledger and Outbox:
//
//	rep, err := status.Read(ctx, js, nil, status.Config{Stream: "PAY", Durable: "jetledger",
//		DB: "pay.db", Partitions: status.LocalPartitions("pay.db")})
//
// Problems are errors, to be checked with errors.Is and errors.As:
// jetstream.ErrStreamNotFound, jetstream.ErrConsumerNotFound,
// ackwait.ErrAckWaitTooShort (an *ackwait.TooShortError),
// *StrayLedgerError.
package status
