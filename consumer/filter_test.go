package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
)

// A durable made for one share of the stream (a partition's filter) is not
// bound by a consumer asking for another share, or for all of it: that
// would feed one ledger another partition's messages.
func TestDurableWithOtherFiltersIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	plan := ackwait.Plan{Deadline: time.Second, BatchSize: 10}
	if _, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: plan, FilterSubjects: []string{"ev.a"}}); err != nil {
		t.Fatal(err)
	}
	for _, filters := range [][]string{nil, {"ev.b"}, {"ev.a", "ev.b"}} {
		_, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: plan, FilterSubjects: filters})
		if !errors.Is(err, consumer.ErrFilterMismatch) {
			t.Errorf("filters %q on a durable made for ev.a: %v, want ErrFilterMismatch", filters, err)
		}
	}
	if _, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: plan, FilterSubjects: []string{"ev.a"}}); err != nil {
		t.Fatalf("the same filter again: %v", err)
	}
}
