package main

import (
	"testing"

	"go.uber.org/goleak"
)

// Commands run servers, consumers and dispatchers in-process in these tests:
// none may outlive its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
