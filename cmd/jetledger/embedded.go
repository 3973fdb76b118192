package main

import (
	"fmt"
	"io"
	"time"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/node"
)

// embeddedFlags configure the embedded server of run and replay.
type embeddedFlags struct {
	Listen        string       `name:"listen" default:"127.0.0.1:4222" placeholder:"HOST:PORT" help:"embedded server's listen address (without --nats)"`
	EmbeddedToken string       `name:"embedded-token" help:"require this token of every client of the embedded server (clients pass --nats-token)"`
	StoreDir      string       `name:"store-dir" placeholder:"DIR" help:"embedded server's JetStream store (default: <db>.nats beside the database)"`
	SyncInterval  syncInterval `name:"sync-interval" placeholder:"always|DURATION" help:"how often the embedded server fsyncs its JetStream store: always (the default) syncs every write before the publish is acked (the embedded store is the system of record); a duration such as 2m is faster but loses up to that long of acked messages on power loss"`
	hubFlags      `group:"edge"`
}

// syncInterval is the value of --sync-interval: "always" (interval 0, the
// zero value) or a positive duration. It has no default tag, so set says
// it was given (command line, environment or config file).
type syncInterval struct {
	interval time.Duration
	set      bool
}

// Decode reads the flag's value for kong (node.ParseSyncInterval).
func (s *syncInterval) Decode(ctx *kong.DecodeContext) error {
	v, err := popFlagValue(ctx, "always|duration")
	if err == nil {
		s.interval, err = node.ParseSyncInterval(v)
		s.set = err == nil
	}
	return err
}

func (s syncInterval) String() string {
	if s.interval == 0 {
		return "always"
	}
	return s.interval.String()
}

// closeScratch stops the scratch node demo or bench ran on and removes its
// directory, or with keep reports where it is.
func closeScratch(n *node.Scratch, keep bool, report io.Writer) {
	if !keep {
		n.Remove()
		return
	}
	n.Close()
	fmt.Fprintf(report, "kept %s\n", n.Dir)
}
