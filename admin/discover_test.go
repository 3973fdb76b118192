package admin_test

import (
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// A run whose API is served only after discovery's first request went by
// (across a cluster, its subscription reaches the asker's server a moment
// late) is still found, once: Discover asks again until one answers.
// Asking once finds none here.
func TestDiscoverAsksAgainUntilARunAnswers(t *testing.T) {
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	runNC, _ := consumertest.Connect(t, srv)
	served := make(chan micro.Service, 1)
	spy, err := runNC.Subscribe("$SRV.INFO."+admin.ServiceName, func(*nats.Msg) {
		if len(served) > 0 {
			return
		}
		// The first request has gone by unanswered: serve the API now.
		svc, err := micro.AddService(runNC, micro.Config{Name: admin.ServiceName, Version: "0.0.1",
			Metadata: map[string]string{"stream": "PAY", "durable": "late", "role": "owner"}})
		if err != nil {
			t.Error(err)
		}
		served <- svc
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := runNC.Flush(); err != nil {
		t.Fatal(err)
	}
	found, err := admin.Discover(t.Context(), nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	spy.Unsubscribe() //nolint:errcheck // done
	select {
	case svc := <-served:
		defer svc.Stop() //nolint:errcheck // done
	default:
		t.Fatal("the spy never saw discovery's request")
	}
	if len(found) != 1 || found[0].Durable != "late" || found[0].Stream != "PAY" || found[0].Role != "owner" {
		t.Fatalf("Discover found %+v; want the one run served after its first request", found)
	}
}
