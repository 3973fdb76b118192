package partition_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/consumer/partition"
)

func ExampleRun() {
	errClosed := errors.New("ledger closed")
	err := partition.Run(context.Background(), partition.Config{
		Partitions: partition.Here([]int{2, 0}, 4),
		Start: func(ctx context.Context, i int) error {
			fmt.Println(partition.Durable("jetledger", i) + " " + partition.Ledger("ledger.db", i) + " " + partition.Filter(i))
			if i == 2 {
				return errClosed // stops partition 0 too
			}
			<-ctx.Done()
			return nil
		},
	})
	fmt.Println(err)
	// Unordered output:
	// jetledger-p0 ledger-p0.db 0.>
	// jetledger-p2 ledger-p2.db 2.>
	// partition 2: ledger closed
}
