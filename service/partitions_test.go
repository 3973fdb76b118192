package service

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/sqlhandler"
)

// RunPartitions with Count 3 and Named 0 (run --partitions 3 --partition 0) checks its SQL against partition 0's
// ledger only: another partition's ledger beside --db (a moved partition's
// old file, say) is not opened, so no -wal or -shm appears beside it, which
// would make a ledger backup back to that path refuse.
func TestPartitionSQLCheckReadsOnlyItsPartitions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	other := partition.Ledger(db, 1)
	st, err := ledger.Open(other, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(dir, "schema.sql")
	if err := os.WriteFile(schema, []byte(`CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY);`), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(schema)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DB: db, SQL: sqlhandler.Config{SchemaName: schema, Schema: string(b), Apply: `INSERT INTO t VALUES (:msg_id)`}}
	if err := checkPartitionsSQL(context.Background(), cfg, Partitions{Count: 3, Named: []int{0}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{other + "-wal", other + "-shm", partition.Ledger(db, 2)} {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after the SQL check of partition 0 (%v)", f, err)
		}
	}
}
