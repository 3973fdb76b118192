package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// embeddedConfig configures startEmbedded.
type embeddedConfig struct {
	// Listen is the client address, "host:port"; port 0 picks a free one.
	Listen string
	// StoreDir is the JetStream store, created if missing. Required.
	StoreDir string
	// Token, when set, is required of every client.
	Token string
	// Sync is how often the store is fsynced. Zero, the default, syncs every
	// write before the publish is acked (nats-server's sync_interval: always);
	// a positive duration syncs in the background that often.
	Sync time.Duration
	// Leaf, when set, makes the server a leaf node of a hub with its own
	// JetStream domain, Domain.
	Leaf   *server.RemoteLeafOpts
	Domain string
}

// embedded is a JetStream server inside this process: one binary is a whole
// edge node.
type embedded struct {
	srv  *server.Server
	lock *storeLock
	dir  string // the store, absolute

	mu      sync.Mutex
	depends map[string]bool // the streams run uses (dependOn)
	warned  map[string]bool // other streams whose failure was logged
}

// dependOn names streams that run cannot do without (its stream, the
// effects stream): a failure of theirs stops run; another stream's, which
// may be lasting (one that did not recover at start), is only logged.
func (e *embedded) dependOn(streams ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.depends == nil {
		e.depends = map[string]bool{}
	}
	for _, s := range streams {
		e.depends[s] = true
	}
}

// startEmbedded starts a JetStream server on cfg.Listen with its store in
// cfg.StoreDir, which it locks for as long as it runs: two servers on one
// store lose messages each acked as stored.
func startEmbedded(cfg embeddedConfig, log *slog.Logger) (*embedded, error) {
	host, port, err := hostPort("--listen", cfg.Listen)
	if err != nil {
		return nil, err
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if cfg.Sync < 0 {
		return nil, usagef("--sync-interval %s: want always or a positive duration", cfg.Sync)
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded server store %s: %w", cfg.StoreDir, err)
	}
	abs, err := filepath.Abs(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	lock, err := lockStore(abs)
	if err != nil {
		return nil, err
	}
	if !storeLockSupported {
		log.Warn("this OS has no flock: the embedded server's store is not locked against a second owner", "store", abs)
	}
	// Fail early and clearly when the port is taken: the server would only log it.
	if port != server.RANDOM_PORT {
		l, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			lock.Close()
			return nil, fmt.Errorf("embedded server cannot listen on %s: %w; pass --nats URL to use the server already there, or --listen to pick another address", cfg.Listen, err)
		}
		l.Close()
	}
	opts := &server.Options{
		ServerName:    "jetledger-embedded",
		Host:          host,
		Port:          port,
		JetStream:     true,
		StoreDir:      abs,
		NoSigs:        true, // signals belong to jetledger's own shutdown
		NoLog:         true,
		Authorization: cfg.Token,
		// As the config file's sync_interval: always, which keeps the
		// background interval at its default as well.
		SyncAlways:   cfg.Sync == 0,
		SyncInterval: cfg.Sync,
	}
	if cfg.Leaf != nil {
		// The hub drops a leaf whose server name it already has as a stale
		// duplicate: two sites named alike would knock each other off.
		opts.ServerName = "jetledger-" + cfg.Domain
		opts.JetStreamDomain = cfg.Domain
		opts.LeafNode = server.LeafNodeOpts{ReconnectInterval: leafReconnect, Remotes: []*server.RemoteLeafOpts{cfg.Leaf}}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		lock.Close()
		return nil, errors.New("embedded server did not become ready within 30s")
	}
	lock.serving(srv.ClientURL())
	log.Info("embedded JetStream server started", "url", srv.ClientURL(), "store", abs, "sync_interval", syncInterval{interval: cfg.Sync}.String())
	if cfg.Leaf != nil {
		hub := make([]string, len(cfg.Leaf.URLs))
		for i, u := range cfg.Leaf.URLs {
			hub[i] = u.Redacted()
		}
		log.Info("leaf node of the hub; processing goes on while the link is down", "hub", strings.Join(hub, ","), "domain", cfg.Domain)
	}
	return &embedded{srv: srv, lock: lock, dir: abs}, nil
}

// errStoreFailed: the embedded server failed to write its store (a full
// disk, a read-only filesystem) and keeps failing every publish (unacked)
// until it is restarted: nats-server remembers a stream's first write
// error, and turns JetStream off on a permission error.
var errStoreFailed = errors.New("the embedded JetStream server cannot write its store")

// fault is the store's failure as the server's own health check sees it:
// JetStream off (the server turns it off on a write it cannot make), or a
// failure (a write error it keeps, or no recovery) of a stream run depends
// on, or of any stream while run has named none.
func (e *embedded) fault() error {
	hs := e.srv.Healthz(&server.HealthzOptions{Details: true})
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, he := range hs.Errors {
		switch {
		case he.Type == server.HealthzErrorJetStream,
			he.Type == server.HealthzErrorStream && (len(e.depends) == 0 || e.depends[he.Stream]):
			return fmt.Errorf("%w (%s): %s", errStoreFailed, e.dir, he.Error)
		}
	}
	return nil
}

// others are the failures of streams run does not depend on, each reported
// once: logged, never a reason to stop.
func (e *embedded) others() []server.HealthzError {
	hs := e.srv.Healthz(&server.HealthzOptions{Details: true})
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []server.HealthzError
	for _, he := range hs.Errors {
		if he.Type == server.HealthzErrorStream && len(e.depends) > 0 && !e.depends[he.Stream] && !e.warned[he.Stream] {
			if e.warned == nil {
				e.warned = map[string]bool{}
			}
			e.warned[he.Stream] = true
			out = append(out, he)
		}
	}
	return out
}

// storeWatchEvery is how often run asks the embedded server about its store.
const storeWatchEvery = time.Second

// watch asks the server about its store every interval until ctx ends and
// returns nil then, or returns the store's failure once two asks in a row
// have seen it (a stream being created or deleted is briefly missing): it
// is logged at error with what to do, for run to stop. A server that cannot
// write cannot recover in place, and a process that stays up keeps its
// supervisor from restarting it.
func (e *embedded) watch(ctx context.Context, every time.Duration, log *slog.Logger) error {
	t := time.NewTicker(every)
	defer t.Stop()
	seen := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, he := range e.others() {
			log.WarnContext(ctx, "a stream of the embedded store that run does not use has failed (not recovered, or a write error); run goes on",
				"store", e.dir, "stream", he.Stream, "err", he.Error)
		}
		err := e.fault()
		if err == nil {
			seen = 0
			continue
		}
		if seen++; seen < 2 {
			continue
		}
		disk := ledger.CheckDisk(e.dir)
		log.ErrorContext(ctx, "the embedded JetStream server cannot write its store, and every publish to it goes unacknowledged until it restarts: stopping. Free space on the disk (or make it writable), then start run again; what it acknowledged is on disk and is applied after the restart, and publishers must retry what was not acknowledged",
			"store", e.dir, "store_state", stateOf(err), "disk_state", stateOf(disk), "err", err)
		return fmt.Errorf("%w: free space on its disk or make it writable, then start run again (a supervisor restarts it); publishes it did not acknowledge must be retried", err)
	}
}

func (e *embedded) URL() string { return e.srv.ClientURL() }

// Close stops the server, then releases its store.
func (e *embedded) Close() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.lock.Close()
}

// embeddedFlags configure the embedded server of run and replay.
type embeddedFlags struct {
	Listen        string       `name:"listen" default:"127.0.0.1:4222" placeholder:"HOST:PORT" help:"embedded server's listen address (without --nats)"`
	EmbeddedToken string       `name:"embedded-token" help:"require this token of every client of the embedded server (clients pass --nats-token)"`
	StoreDir      string       `name:"store-dir" placeholder:"DIR" help:"embedded server's JetStream store (default: <db>.nats beside the database)"`
	SyncInterval  syncInterval `name:"sync-interval" placeholder:"always|DURATION" help:"how often the embedded server fsyncs its JetStream store: always (the default) syncs every write before the publish is acked (the embedded store is the system of record); a duration such as 2m is faster but loses up to that long of acked messages on power loss"`
	hubFlags      `group:"edge"`
}

// validate checks the embedded server's flags. With --nats (external) there
// is no embedded server: the flags only it reads are refused rather than
// silently ignored.
func (e embeddedFlags) validate(external bool) error {
	switch {
	case external && e.EmbeddedToken != "":
		return usagef("--embedded-token is for the embedded server; with --nats use --nats-token")
	case external && e.SyncInterval.set:
		return usagef("--sync-interval is for the embedded server; the server at --nats syncs as its own sync_interval says")
	case external:
		return nil
	}
	_, _, err := hostPort("--listen", e.Listen)
	return err
}

// syncInterval is the value of --sync-interval: "always" (interval 0, the
// zero value) or a positive duration. It has no default tag, so set says
// it was given (command line, environment or config file).
type syncInterval struct {
	interval time.Duration
	set      bool
}

// Decode reads the flag's value for kong.
func (s *syncInterval) Decode(ctx *kong.DecodeContext) error {
	v, err := popFlagValue(ctx, "always|duration")
	if err != nil {
		return err
	}
	if strings.EqualFold(v, "always") {
		s.interval, s.set = 0, true
		return nil
	}
	d, err := ackwait.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q: want always or a positive duration such as 2m", v)
	}
	s.interval, s.set = d, true
	return nil
}

func (s syncInterval) String() string {
	if s.interval == 0 {
		return "always"
	}
	return s.interval.String()
}

// scratchNode is an embedded JetStream server in a temporary directory with
// a client connected to it: where demo and bench run.
type scratchNode struct {
	dir string
	srv *embedded
	nc  *nats.Conn
	js  jetstream.JetStream
}

// newScratchNode starts a scratch node whose store syncs as sync says
// (0: every write, as run's default).
func newScratchNode(ctx context.Context, name string, sync time.Duration, log *slog.Logger) (*scratchNode, error) {
	dir, err := os.MkdirTemp("", "jetledger-"+name+"-*")
	if err != nil {
		return nil, err
	}
	n := &scratchNode{dir: dir}
	if n.srv, err = startEmbedded(embeddedConfig{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats"), Sync: sync}, log); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if n.nc, n.js, err = connect(ctx, natsFlags{URL: n.srv.URL()}, log); err != nil {
		n.srv.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return n, nil
}

// Close stops the server and removes the directory, or with keep reports
// where it is.
func (n *scratchNode) Close(keep bool, report io.Writer) {
	n.nc.Close()
	n.srv.Close()
	if keep {
		fmt.Fprintf(report, "kept %s\n", n.dir)
		return
	}
	os.RemoveAll(n.dir)
}
