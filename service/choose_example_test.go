package service_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/service"
)

// A tool told no stream reads the one Run recorded in the ledger; a
// ledger yet to be made names nothing, and the defaults are used.
func ExampleChooseAt() {
	dir, err := os.MkdirTemp("", "jetledger-choose-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, db := context.Background(), filepath.Join(dir, "l.db")

	c, err := service.ChooseAt(ctx, db, ledger.Config{}, service.Want{})
	fmt.Println(c.Stream, c.Durable, c.From, err)

	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := st.RememberConsumer(ctx, "ORDERS", "billing", ""); err != nil {
		log.Fatal(err)
	}
	st.Close()
	c, err = service.ChooseAt(ctx, db, ledger.Config{}, service.Want{})
	fmt.Println(c.Stream, c.Durable, c.From, err)
	// Output:
	// EVENTS jetledger default <nil>
	// ORDERS billing ledger <nil>
}
