package ledger

import (
	"testing"

	"go.uber.org/goleak"
)

// The store runs a checkpoint goroutine: every test must leave none behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
