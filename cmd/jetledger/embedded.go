package main

import (
	"time"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/node"
)

// embeddedFlags configure the embedded server of run and replay.
type embeddedFlags struct {
	Listen        string            `name:"listen" default:"127.0.0.1:4222" placeholder:"HOST:PORT" help:"embedded server's listen address (without --nats)"`
	EmbeddedToken string            `name:"embedded-token" help:"the admin's token: a client of the embedded server that gives it (--nats-token) may do anything, delete the stream included. Better --embedded-token-file; a command line is seen by every local user"`
	TokenFile     string            `name:"embedded-token-file" secret:"embedded-token" placeholder:"FILE" help:"read --embedded-token from this file (default under systemd: $CREDENTIALS_DIRECTORY/embedded-token, if there)"`
	Publishers    kongx.SecretLines `name:"publisher-token-file" placeholder:"FILE" help:"publishers' tokens, one a line: a client giving one may publish to the stream's subjects (--subjects) and read its acks, nothing else"`
	Operators     kongx.SecretLines `name:"operator-token-file" placeholder:"FILE" help:"operators' tokens, one a line: a client giving one may use the admin API (reads and actions: jetledger outbox, dlq, conflicts through --nats) and read streams and consumers, and delete or purge nothing; its inbox prefix must be _INBOX.operators"`
	Viewers       kongx.SecretLines `name:"viewer-token-file" placeholder:"FILE" help:"viewers' tokens, one a line: a client giving one may use the admin API's reads and read streams and consumers, nothing else; its inbox prefix must be _INBOX.viewers"`
	TLSCert       string            `name:"listen-tls-cert" placeholder:"FILE" help:"serve --listen with TLS: the server's certificate (PEM), with --listen-tls-key"`
	TLSKey        string            `name:"listen-tls-key" placeholder:"FILE" help:"the key of --listen-tls-cert (PEM)"`
	TLSClientCA   string            `name:"listen-tls-client-ca" placeholder:"FILE" help:"with --listen-tls-cert, ask every client for a certificate this CA signed (PEM)"`
	Insecure      bool              `name:"insecure-listen" help:"let a --listen that is not loopback take clients with no credential, on a network you trust (warned at every start)"`
	StoreDir      string            `name:"store-dir" placeholder:"DIR" help:"embedded server's JetStream store (default: <db>.nats beside the database)"`
	SyncInterval  syncInterval      `name:"sync-interval" placeholder:"always|DURATION" help:"how often the embedded server fsyncs its JetStream store: always (the default) syncs every write before the publish is acked (the embedded store is the system of record); a duration such as 2m is faster but loses up to that long of acked messages on power loss"`
	hubFlags      `group:"edge"`
}

// node is the embedded server's config; the service fills in the rest.
func (e embeddedFlags) node() node.Config {
	return node.Config{Listen: e.Listen, StoreDir: e.StoreDir, Token: e.EmbeddedToken, SyncInterval: e.SyncInterval.interval,
		Publishers: node.PublishRole{Tokens: e.Publishers.Values}, Operators: e.Operators.Values, Viewers: e.Viewers.Values, Insecure: e.Insecure, Leaf: e.leaf(),
		TLS: node.TLSConfig{Cert: e.TLSCert, Key: e.TLSKey, ClientCA: e.TLSClientCA}}
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
