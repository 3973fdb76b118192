package metrics_test

import (
	"bufio"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// counts stands for a *consumer.Consumer that applied 3 messages.
type counts struct{}

func (counts) Counts() consumer.Counts { return consumer.Counts{Applied: 3} }

func Example() {
	b := metrics.NewBatches()
	col, err := metrics.New(metrics.Config{Consumer: counts{}})
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(b, col)

	// The consumer calls these hooks after each batch.
	b.AfterCommit(consumer.BatchReport{Results: make([]ledger.Result, 4), Elapsed: 2 * time.Millisecond})
	b.AfterAcks(consumer.AckReport{N: 4, Elapsed: time.Millisecond})

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "jetledger_messages_applied_total":
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		case "jetledger_batch_messages":
			h := f.GetMetric()[0].GetHistogram()
			fmt.Println(f.GetName(), h.GetSampleCount(), h.GetSampleSum())
		}
	}
	// Output:
	// jetledger_batch_messages 1 4
	// jetledger_messages_applied_total 3
}

// Handler serves the collectors at a scrape endpoint of their own.
func ExampleHandler() {
	col, err := metrics.New(metrics.Config{Consumer: counts{}})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(metrics.Handler(metrics.NewBatches(), col))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "jetledger_messages_applied_total ") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// jetledger_messages_applied_total 3
}
