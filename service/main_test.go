package service

import (
	"testing"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, consumertest.KnownLeaks...) }
