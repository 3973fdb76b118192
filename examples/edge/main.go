// Command edge is a whole edge node: an embedded JetStream server, leaf of a hub, whose orders
// are applied to SQLite and whose effects go out through the outbox's NATS sink to a stream
// the hub can source; /metrics and /healthz on -http. Run: go run ./examples/edge -hub nats-leaf://hub:7422
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/metrics"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
)

// Config is what run needs; Ready, if set, is told the addresses once the node serves.
type Config struct {
	Hub, Domain, Dir, Listen, HTTP string
	Ready                          func(natsURL, httpAddr string)
}

func main() {
	c := Config{Dir: "edge-data", Listen: "127.0.0.1:4222", HTTP: "127.0.0.1:9090"}
	flag.StringVar(&c.Hub, "hub", "nats-leaf://127.0.0.1:7422", "the hub's leaf node URL")
	flag.StringVar(&c.Domain, "domain", "site1", "this site's JetStream domain")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}

// snippet:edge-run
func run(ctx context.Context, c Config) error {
	n, err := node.Start(ctx, node.Config{StoreDir: filepath.Join(c.Dir, "nats"), Listen: c.Listen,
		Leaf: &node.LeafConfig{URLs: []string{c.Hub}, Domain: c.Domain}})
	if err != nil {
		return err // node.ErrStoreLocked: another process owns the store
	}
	defer n.Close()
	js, err := n.JetStream()
	if err != nil {
		return err
	}
	st, err := ledger.Open(filepath.Join(c.Dir, "edge.db"), ledger.Config{Sinks: []string{"nats"}})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err = stream.Ensure(ctx, js, stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: 2 * time.Minute}); err != nil {
		return err
	}
	if err = stream.EnsureEffects(ctx, js, stream.Effects{Stream: "EFFECTS", Subject: "effects.orders", Timeout: 5 * time.Second}); err != nil {
		return err
	}
	sink, err := natssink.New(ctx, js, js.Conn(), natssink.Config{Subject: "effects.orders", Ledger: st})
	if err != nil {
		return err
	}
	h, err := sqlhandler.New(ctx, st, sqlhandler.Config{
		Schema: `CREATE TABLE IF NOT EXISTS orders (msg_id TEXT PRIMARY KEY, body TEXT NOT NULL)`,
		Apply:  `INSERT INTO orders (msg_id, body) VALUES (:msg_id, :data)`,
		Effect: ledger.EnqueuePayload("nats"), // published to EFFECTS once committed
	})
	if err != nil {
		return err
	}
	cons, err := consumer.New(ctx, js, st, consumer.Config{Stream: "ORDERS", Durable: "edge", Handler: h.Handle})
	if err != nil {
		return err
	}
	d, err := outbox.New(st, outbox.Config{Sink: sink})
	if err != nil {
		return err
	}
	col, err := metrics.New(metrics.Config{Consumer: cons, Outbox: st, Sends: d})
	if err != nil {
		return err
	}
	hh, err := health.New(health.Config{}, health.NATS(js.Conn()), health.Database(st), health.Consumer(cons))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.HTTP)
	if err != nil {
		return err
	}
	go metrics.Serve(ctx, ln, hh, col) //nolint:errcheck // /metrics and /healthz until ctx ends
	if c.Ready != nil {
		c.Ready(n.ClientURL(), ln.Addr().String())
	}
	go d.Run(ctx) //nolint:errcheck // only fails when the outbox cannot be read; health reports the database
	return cons.Run(ctx)
}

// end snippet
