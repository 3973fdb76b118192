package outbox_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The dispatcher runs workers: none may outlive its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
