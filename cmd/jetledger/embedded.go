package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
}

// embedded is a JetStream server inside this process: one binary is a whole
// edge node.
type embedded struct {
	srv  *server.Server
	lock *storeLock
}

// startEmbedded starts a JetStream server on cfg.Listen with its store in
// cfg.StoreDir, which it locks for as long as it runs: two servers on one
// store lose messages each acked as stored.
func startEmbedded(cfg embeddedConfig, log *slog.Logger) (*embedded, error) {
	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, usagef("--listen %q: want host:port: %v", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, usagef("--listen %q: bad port", cfg.Listen)
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
	log.Info("embedded JetStream server started", "url", srv.ClientURL(), "store", abs, "sync_interval", syncFlag{interval: cfg.Sync}.String())
	return &embedded{srv: srv, lock: lock}, nil
}

func (e *embedded) URL() string { return e.srv.ClientURL() }

// Close stops the server, then releases its store.
func (e *embedded) Close() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.lock.Close()
}

// syncIntervalUsage is the --help text of --sync-interval.
const syncIntervalUsage = `how often the embedded server fsyncs its JetStream store: "always" syncs every write before the publish is acked (the embedded store is the system of record); a duration such as 2m is faster but loses up to that long of acked messages on power loss`

// syncFlag is the value of --sync-interval: "always" (interval 0) or a
// positive duration.
type syncFlag struct {
	interval time.Duration
	set      bool // given on the command line or in the environment
}

// syncIntervalFlag registers --sync-interval, default always, on fs.
func syncIntervalFlag(fs *flag.FlagSet) *syncFlag {
	s := new(syncFlag)
	fs.Var(s, "sync-interval", syncIntervalUsage)
	return s
}

func (s syncFlag) String() string {
	if s.interval == 0 {
		return "always"
	}
	return s.interval.String()
}

func (s *syncFlag) Set(v string) error {
	if strings.EqualFold(v, "always") {
		s.interval, s.set = 0, true
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("want always or a positive duration such as 2m")
	}
	s.interval, s.set = d, true
	return nil
}

// storeLockFile, inside the store, carries the flock of the process that owns
// the store. Its content, the owner's pid and URL, only names the owner: the
// kernel releases the lock when the owner dies, so a file left by a killed
// process refuses nobody.
const storeLockFile = "jetledger.lock"

// storeLock is the held lock of an embedded server's store.
type storeLock struct {
	f *os.File
}

// storeInUseError is the refusal of a store another process owns.
type storeInUseError struct {
	Dir string
	PID int    // 0 when the owner had not written it yet
	URL string // the owner's server, when it had started
}

func (e *storeInUseError) Error() string {
	owner, url := "another process", "URL"
	if e.PID > 0 {
		owner = "pid " + strconv.Itoa(e.PID)
	}
	if e.URL != "" {
		owner += ", serving " + e.URL
		url = e.URL
	}
	return fmt.Sprintf("embedded server store %s is in use by %s (lock %s): stop that process, "+
		"or give this one another --db or --store-dir, or connect to the running server with --nats %s",
		e.Dir, owner, filepath.Join(e.Dir, storeLockFile), url)
}

// lockStore takes the exclusive lock of the store dir without waiting, and
// writes this process's pid into the lock file.
func lockStore(dir string) (*storeLock, error) {
	path := filepath.Join(dir, storeLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock embedded server store: %w", err)
	}
	held, err := flockExclusive(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock embedded server store %s: %w", path, err)
	}
	if !held {
		defer f.Close()
		inUse := &storeInUseError{Dir: dir}
		sc := bufio.NewScanner(io.LimitReader(f, 4096))
		if sc.Scan() {
			inUse.PID, _ = strconv.Atoi(strings.TrimSpace(sc.Text())) // unreadable: the owner is unnamed, still refused
		}
		if sc.Scan() {
			inUse.URL = strings.TrimSpace(sc.Text())
		}
		return nil, inUse
	}
	l := &storeLock{f: f}
	if err := l.write(""); err != nil {
		l.Close()
		return nil, fmt.Errorf("lock embedded server store %s: %w", path, err)
	}
	return l, nil
}

// serving adds the server's URL to the lock file, so a refused second run
// can say where to connect instead. The lock holds without it.
func (l *storeLock) serving(url string) {
	_ = l.write(url) // informational only
}

func (l *storeLock) write(url string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(fmt.Sprintf("%d\n%s\n", os.Getpid(), url)), 0)
	return err
}

// Close empties the lock file and releases the lock.
func (l *storeLock) Close() {
	_ = l.f.Truncate(0) // a clean stop leaves no owner named
	_ = funlock(l.f)    // closing releases it too; this says so
	l.f.Close()
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
	if n.nc, n.js, err = connect(ctx, natsFlags{url: n.srv.URL()}, log); err != nil {
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
