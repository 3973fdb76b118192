package node

import (
	"testing"

	"go.uber.org/goleak"
)

// A node runs a whole server: Close must leave none of its goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
