package service

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/status"
)

// ReadStatus chooses the names as Choose does, from the ledger or the
// first partition's; a ledger not there is a problem, never an empty
// ledger made; several consumers that fit are the caller's to choose.
func TestReadStatusChoosesTheNamesFromTheLedgerItReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := status.Config{Logger: quiet}

	missing := filepath.Join(t.TempDir(), "none.db")
	r, err := ReadStatus(ctx, nil, missing, Want{}, cfg)
	if err != nil || len(r.Problems) != 1 || !errors.Is(r.Problems[0], fs.ErrNotExist) || r.Chosen.From != FromDefault || r.Chosen.Stream != StreamDefault {
		t.Fatalf("no ledger: %+v, %v; want one problem of a file not there, and the defaults", r, err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadStatus made the ledger it was told to read: %v", err)
	}

	one := recorded(t, [2]string{"PAY", "payer"})
	if r, err = ReadStatus(ctx, nil, one, Want{}, cfg); err != nil || r.Chosen.Stream != "PAY" || r.Chosen.Durable != "payer" ||
		r.Chosen.From != FromLedger || r.NamesLedger != one || r.Ledger == nil || len(r.Problems) != 0 {
		t.Fatalf("one consumer: %+v, %v; want PAY/payer from %s with its stats", r, err, one)
	}

	// A partitioned run keeps no ledger at db: the partitions' are read,
	// and the first names the consumer.
	base := filepath.Join(t.TempDir(), "p.db")
	for i := range 2 {
		src := recorded(t, [2]string{"ORD", "orders"})
		if err := os.Rename(src, partition.Ledger(base, i)); err != nil {
			t.Fatal(err)
		}
	}
	if r, err = ReadStatus(ctx, nil, base, Want{}, cfg); err != nil || r.Chosen.Stream != "ORD" || r.NamesLedger != partition.Ledger(base, 0) || len(r.Partitions) != 2 {
		t.Fatalf("partitions: %+v, %v; want ORD from partition 0's ledger, two partitions", r, err)
	}

	two := recorded(t, [2]string{"PAY", "payer"}, [2]string{"ORD", "orders"})
	if _, err := ReadStatus(ctx, nil, two, Want{}, cfg); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("two streams recorded: %v, want ErrAmbiguous", err)
	}
	if r, err = ReadStatus(ctx, nil, two, Want{Stream: "ORD"}, cfg); err != nil || r.Chosen.Durable != "orders" {
		t.Fatalf("two recorded, one named: %+v, %v; want ORD/orders", r, err)
	}
}
