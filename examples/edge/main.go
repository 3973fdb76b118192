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

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/service"
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
	flag.StringVar(&c.HTTP, "http", c.HTTP, "the address of /metrics and /healthz")
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
	ln, err := net.Listen("tcp", c.HTTP) // /metrics and /healthz, served while Run runs
	if err != nil {
		return err
	}
	defer ln.Close()
	s, err := service.Start(ctx, service.Config{
		DB: filepath.Join(c.Dir, "edge.db"),
		Node: node.Config{StoreDir: filepath.Join(c.Dir, "nats"), Listen: c.Listen,
			Leaf: &node.LeafConfig{URLs: []string{c.Hub}, Domain: c.Domain}},
		Stream: stream.Config{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: 2 * time.Minute,
			Limits: stream.Limits{MaxAge: 7 * ackwait.Day}},
		Consumer: consumer.Config{Durable: "edge"},
		SQL: sqlhandler.Config{
			Schema: `CREATE TABLE IF NOT EXISTS orders (msg_id TEXT PRIMARY KEY, body TEXT NOT NULL)`,
			Apply:  `INSERT INTO orders (msg_id, body) VALUES (:msg_id, :data)`,
		},
		// Each applied order's payload, published to EFFECTS once committed.
		Effects: &service.Effects{Subject: "effects.orders", Stream: "EFFECTS"},
		Prune:   service.Prune{Interval: time.Hour, Retention: 7 * ackwait.Day},
		Metrics: ln,
	})
	if err != nil {
		return err // a *service.StepError; node.ErrStoreLocked: another process owns the store
	}
	defer s.Close()
	if c.Ready != nil {
		c.Ready(s.JetStream().Conn().ConnectedUrl(), ln.Addr().String())
	}
	return s.Run(ctx) // nil once ctx ends, after the batch in hand
}

// end snippet
