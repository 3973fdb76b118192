package metrics

import (
	"github.com/jetledger/jetledger/consumer"
	"github.com/prometheus/client_golang/prometheus"
)

// Batches observes what the consumer's totals do not keep: each committed
// batch's size and commit time and the time its acks took. Its hooks go
// into consumer.Config before the consumer is made; it is a
// prometheus.Collector of three histograms.
type Batches struct {
	batchSize, commitSeconds, ackSeconds prometheus.Histogram
}

// NewBatches returns the histograms jetledger_batch_messages,
// jetledger_batch_commit_seconds and jetledger_batch_ack_seconds.
func NewBatches() *Batches {
	return &Batches{
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jetledger_batch_messages",
			Help: "Messages per committed batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jetledger_batch_commit_seconds",
			Help: "Time from a batch's begin to its commit, handlers included.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		ackSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jetledger_batch_ack_seconds",
			Help: "Time to send a committed batch's acks, naks and terms.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14)}),
	}
}

// AfterCommit is a consumer.Config.AfterCommit hook.
func (b *Batches) AfterCommit(r consumer.BatchReport) {
	b.batchSize.Observe(float64(len(r.Results)))
	b.commitSeconds.Observe(r.Elapsed.Seconds())
}

// AfterAcks is a consumer.Config.AfterAcks hook.
func (b *Batches) AfterAcks(r consumer.AckReport) { b.ackSeconds.Observe(r.Elapsed.Seconds()) }

// Describe implements prometheus.Collector.
func (b *Batches) Describe(ch chan<- *prometheus.Desc) {
	b.batchSize.Describe(ch)
	b.commitSeconds.Describe(ch)
	b.ackSeconds.Describe(ch)
}

// Collect implements prometheus.Collector.
func (b *Batches) Collect(ch chan<- prometheus.Metric) {
	b.batchSize.Collect(ch)
	b.commitSeconds.Collect(ch)
	b.ackSeconds.Collect(ch)
}
