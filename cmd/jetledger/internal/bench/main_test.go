package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// The latency run starts publishers and consumers: none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
