package node

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds the wait for a started server to take clients.
const readyTimeout = 30 * time.Second

// Node is a JetStream server inside this process: one binary is a whole
// edge node. Its methods are safe for concurrent use.
type Node struct {
	srv  *server.Server
	lock *storeLock
	dir  string // the store, absolute
	log  *slog.Logger

	token     string     // the in-process connection's (authenticator.internal)
	responder string     // the admin API's connection's (authenticator.responder)
	link      *linkWatch // nil unless a leaf node

	mu      sync.Mutex
	depends map[string]bool // the streams the program uses (DependOn)
	warned  map[string]bool // other streams whose failure was logged
	nc      *nats.Conn      // JetStream's, made on first use
	js      jetstream.JetStream
}

// Start starts a JetStream server on cfg.Listen with its store in
// cfg.StoreDir, which it locks for as long as it runs (a second owner gets
// ErrStoreLocked), and returns once it takes clients. cfg is validated
// before anything is touched. Under a cfg.MemoryLimit the process's Go
// memory limit is set first.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	addr, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	log := cmp.Or(cfg.Logger, slog.Default())
	if err := ApplyMemoryLimit(cfg.MemoryLimit, log); err != nil {
		return nil, err
	}
	opts, err := cfg.options(addr)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("node: store %s: %w", cfg.StoreDir, err)
	}
	if opts.StoreDir, err = filepath.Abs(cfg.StoreDir); err != nil {
		return nil, fmt.Errorf("node: store %s: %w", cfg.StoreDir, err)
	}
	lock, err := lockStore(opts.StoreDir)
	if err != nil {
		return nil, err
	}
	if !LockSupported {
		log.Warn("this OS has no flock: the embedded server's store is not locked against a second owner", "store", opts.StoreDir)
	}
	auth, _ := opts.CustomClientAuthentication.(*authenticator)
	var link *linkWatch
	prepare := func(srv *server.Server) {
		if cfg.Leaf != nil {
			link = newLinkWatch(srv, log, hubURLs(opts))
		}
	}
	n, err := start(ctx, opts, lock, auth, prepare)
	if err != nil {
		lock.Close()
		return nil, err
	}
	n.log, n.link = log, link
	if link != nil {
		link.watch()
	}
	if auth != nil {
		n.token, n.responder = auth.internal, auth.responder
	}
	lock.serving(n.srv.ClientURL())
	log.Info("embedded JetStream server started", "url", n.srv.ClientURL(), "store", n.dir, "sync_interval", syncName(cfg.SyncInterval),
		"auth", authName(cfg), "tls", cfg.TLS.set())
	if cfg.Insecure && authName(cfg) == "none" {
		log.Warn("INSECURE: the embedded server takes clients with no credential: anyone who can reach it may delete the stream", "listen", n.srv.ClientURL())
	}
	if cfg.Leaf != nil {
		log.Info("leaf node of the hub; processing goes on while the link is down", "hub", hubURLs(opts), "domain", cfg.Leaf.Domain)
	}
	return n, nil
}

// hubURLs are the hub's leaf URLs of opts, without passwords.
func hubURLs(opts *server.Options) string {
	hub := make([]string, len(opts.LeafNode.Remotes[0].URLs))
	for i, u := range opts.LeafNode.Remotes[0].URLs {
		hub[i] = u.Redacted()
	}
	return strings.Join(hub, ",")
}

// start checks the port, then starts the server and waits for it.
// prepare is given the server before it starts.
func start(ctx context.Context, opts *server.Options, lock *storeLock, auth *authenticator, prepare func(*server.Server)) (*Node, error) {
	// Fail early and clearly when the port is taken: the server would only log it.
	if opts.Port != server.RANDOM_PORT {
		addr := net.JoinHostPort(opts.Host, fmt.Sprint(opts.Port))
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, &ListenError{Addr: addr, Err: err}
		}
		l.Close()
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("node: start: %w", err)
	}
	if auth != nil {
		auth.srv = srv
	}
	prepare(srv)
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("node: start: the server did not become ready within %s", readyTimeout)
	}
	if auth != nil {
		if err := auth.isolate(); err != nil {
			srv.Shutdown()
			srv.WaitForShutdown()
			return nil, err
		}
	}
	return &Node{srv: srv, lock: lock, dir: opts.StoreDir}, nil
}

// options are the server's options for cfg; a leaf's TLS files are read.
func (cfg Config) options(addr listenAddr) (*server.Options, error) {
	if addr.port == 0 {
		addr.port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "jetledger-embedded",
		Host:       addr.host,
		Port:       addr.port,
		JetStream:  true,
		NoSigs:     true, // signals belong to the program's own shutdown
		NoLog:      true,
		// As the config file's sync_interval: always, which keeps the
		// background interval at its default as well.
		SyncAlways:   cfg.SyncInterval == 0,
		SyncInterval: cfg.SyncInterval,
	}
	auth, err := newAuthenticator(cfg)
	if err != nil {
		return nil, err
	}
	if auth != nil {
		opts.CustomClientAuthentication = auth
	}
	if cfg.TLS.set() {
		if opts.TLSConfig, err = cfg.TLS.serverTLS(cfg.Names); err != nil {
			return nil, err
		}
		opts.TLS, opts.TLSVerify = true, cfg.TLS.ClientCA != ""
	}
	if cfg.Leaf == nil {
		return opts, nil
	}
	remote, err := cfg.Leaf.remote()
	if err != nil {
		return nil, err
	}
	// The hub drops a leaf whose server name it already has as a stale
	// duplicate: two sites named alike would knock each other off.
	opts.ServerName = "jetledger-" + cfg.Leaf.Domain
	opts.JetStreamDomain = cfg.Leaf.Domain
	opts.LeafNode = server.LeafNodeOpts{ReconnectInterval: leafReconnect, Remotes: []*server.RemoteLeafOpts{remote}}
	return opts, nil
}

// remote is the server's leaf connection to the hub.
func (l *LeafConfig) remote() (*server.RemoteLeafOpts, error) {
	urls, err := l.urls()
	if err != nil {
		return nil, err
	}
	// S2 compression off: nats-server v2.15.2 negotiates it with an INFO
	// written in place before the connection's write loop starts, and a
	// write error there (the link reset at that moment) closes the
	// connection without scheduling a reconnect, so the site stayed cut
	// off from its hub until run restarted (found by the nemesis; see
	// TestLeafLinkComesBackAfterAResetInItsHandshake).
	r := &server.RemoteLeafOpts{URLs: urls, Credentials: l.Credentials,
		Compression: server.CompressionOpts{Mode: server.CompressionOff}}
	if l.TLSCA == "" && l.TLSCert == "" {
		return r, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if l.TLSCA != "" {
		var err error
		if tc.RootCAs, err = caPool(l.TLSCA); err != nil {
			return nil, l.fileError(l.TLSCA, true, err) // ErrNoPEM, or the read's
		}
	}
	if l.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(l.TLSCert, l.TLSKey)
		if err != nil {
			return nil, l.fileError(l.TLSCert, false, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	r.TLS, r.TLSConfig = true, tc
	return r, nil
}

func syncName(d time.Duration) string {
	if d == 0 {
		return "always"
	}
	return d.String()
}

// ClientURL is where clients connect, such as nats://127.0.0.1:4222.
func (n *Node) ClientURL() string { return n.srv.ClientURL() }

// StoreDir is the store, absolute.
func (n *Node) StoreDir() string { return n.dir }

// Server is the nats-server itself, for what this package does not wrap
// (its JetStream config, Healthz, Leafz).
func (n *Node) Server() *server.Server { return n.srv }

// Conn is the program's own connection to the node: in-process, with
// the token of this start (every role's rights), whatever the roles and
// TLS of the listener. natsconn.Connect dials it.
func (n *Node) Conn() natsconn.Config {
	// nats:// whatever the listener: a tls:// URL would start TLS over the pipe.
	url := "nats://" + strings.TrimPrefix(strings.TrimPrefix(n.srv.ClientURL(), "tls://"), "nats://")
	return natsconn.Config{URL: url, InProcess: n.srv, Token: n.token, InboxPrefix: privateInbox, Logger: n.log}
}

// privateInbox is the inbox prefix of the program's own connections: a
// publisher may subscribe to _INBOX.> for its acks, and must not read
// the replies to run's requests there.
const privateInbox = "_JETLEDGER_INBOX"

// authName says which clients the node lets in, for its start's log line.
func authName(cfg Config) string {
	switch {
	case cfg.tokens():
		return "tokens"
	case cfg.TLS.ClientCA != "":
		return "client certificates"
	}
	return "none"
}

// AdminConn is a connection for the admin API (package admin), in-process:
// with tokens, as a role that takes requests under its subjects and
// micro's discovery and answers only to inboxes (responderPermissions),
// whatever reply subject a client names. The caller closes it.
func (n *Node) AdminConn() (*nats.Conn, error) {
	tok := cmp.Or(n.responder, n.token)
	nc, err := nats.Connect("", nats.InProcessServer(n.srv), nats.Token(tok), nats.CustomInboxPrefix(privateInbox), nats.Name("jetledger-admin-api"))
	if err != nil {
		return nil, fmt.Errorf("node: connect the admin API: %w", err)
	}
	return nc, nil
}

// JetStream is a JetStream client of the node, connected in-process on
// first use and closed by Close.
func (n *Node) JetStream() (jetstream.JetStream, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.js != nil {
		return n.js, nil
	}
	nc, err := nats.Connect("", nats.InProcessServer(n.srv), nats.Token(n.token), nats.CustomInboxPrefix(privateInbox), nats.Name("jetledger-node"))
	if err != nil {
		return nil, fmt.Errorf("node: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("node: connect: %w", err)
	}
	n.nc, n.js = nc, js
	return js, nil
}

// Close closes JetStream's client, stops the server, then releases its
// store.
func (n *Node) Close() {
	n.mu.Lock()
	if n.nc != nil {
		n.nc.Close()
		n.nc, n.js = nil, nil
	}
	n.mu.Unlock()
	if n.link != nil {
		n.link.close()
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.lock.Close()
}
