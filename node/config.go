package node

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultListen is the client address of a Config without one: NATS's own.
const DefaultListen = "127.0.0.1:4222"

// Config configures Start. The zero value, with StoreDir set, is a
// standalone server on 127.0.0.1:4222 that syncs every write.
type Config struct {
	// StoreDir is the JetStream store, created if missing and locked for as
	// long as the node runs. Required.
	StoreDir string
	// Listen is the client address, "host:port"; port 0 picks a free one.
	// Default DefaultListen.
	Listen string
	// Token, when set, is required of every client. Default: none.
	Token string
	// SyncInterval is how often the store is fsynced. Zero, the default,
	// syncs every write before the publish is acked (nats-server's
	// sync_interval: always): the store is the system of record. A positive
	// duration syncs in the background that often, faster but losing up to
	// that long of acked messages on power loss. Negative is an error.
	SyncInterval time.Duration
	// MemoryLimit, in bytes, keeps the process within about this much
	// memory: Start sets the Go memory limit to it less MemoryReserve
	// (ApplyMemoryLimit). Default 0: no limit (GOMEMLIMIT still works);
	// otherwise at least MemoryLimitMin.
	MemoryLimit ByteSize
	// Leaf, when set, makes the server a leaf node of a hub with its own
	// JetStream domain. Default nil: standalone.
	Leaf *LeafConfig
	// Logger receives the node's records. Default slog.Default().
	Logger *slog.Logger
}

// LeafConfig joins a node to a hub as a leaf node: the edge mode. The node
// gets its own JetStream domain, so the hub reaches its streams by it, and
// processing never waits on the link.
type LeafConfig struct {
	// URLs are the hub's leaf node addresses, such as
	// nats-leaf://hub.example:7422, with user:password@ in them when the hub
	// wants it. At least one.
	URLs []string
	// Domain is this site's JetStream domain, unique per site: the hub
	// reaches the site's streams by it, and two sites with one domain would
	// be served each other's streams. Required: there is no default, since
	// cloned hosts share a host name. Letters, digits, '-' and '_'.
	Domain string
	// HubDomain is the hub's JetStream domain, which Domain must differ
	// from. Default DefaultHubDomain.
	HubDomain string
	// Credentials is a credentials file (JWT and seed) for the leaf
	// connection. Default: none.
	Credentials string
	// TLSCA is a CA certificate file (PEM) to verify the hub. Default: the
	// system's roots, and TLS only if the URL asks for it.
	TLSCA string
	// TLSCert and TLSKey are the client certificate and key files (PEM) of
	// the leaf connection; both or neither.
	TLSCert, TLSKey string
}

// DefaultHubDomain is the hub's JetStream domain of a LeafConfig without one.
const DefaultHubDomain = "hub"

// leafReconnect is how soon the leaf connection is tried again after the
// link drops: the hub's messages wait for it. A variable so that a test
// can run many link drops quickly.
var leafReconnect = time.Second

// domainName is what nats-server accepts as a JetStream domain.
var domainName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// listenAddr is the validated client address.
type listenAddr struct {
	host string
	port int
}

// validate checks cfg across its fields before any I/O.
func (cfg Config) validate() (listenAddr, error) {
	if cfg.StoreDir == "" {
		return listenAddr{}, invalid("StoreDir is required")
	}
	addr, err := parseListen(cmp.Or(cfg.Listen, DefaultListen))
	if err != nil {
		return listenAddr{}, err
	}
	switch {
	case cfg.SyncInterval < 0:
		return listenAddr{}, invalid("SyncInterval %s: want 0 (every write) or a positive duration", cfg.SyncInterval)
	case cfg.Leaf != nil:
		if err := cfg.Leaf.Validate(); err != nil {
			return listenAddr{}, err
		}
	}
	return addr, CheckMemoryLimit(cfg.MemoryLimit)
}

func parseListen(listen string) (listenAddr, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return listenAddr{}, invalid("Listen %q: want host:port", listen)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return listenAddr{}, invalid("Listen %q: the port must be a number from 0 to 65535", listen)
	}
	return listenAddr{host: host, port: port}, nil
}

// Validate checks the leaf's configuration without reading its files:
// the domains (ErrDomain, ErrHubDomain), the TLS pair (ErrTLSPair), the
// URLs (ErrHubURL). Start calls it; a program can call it early.
func (l *LeafConfig) Validate() error {
	hubDomain := cmp.Or(l.HubDomain, DefaultHubDomain)
	switch {
	case !domainName.MatchString(hubDomain):
		return fmt.Errorf("%w: HubDomain %q: want letters, digits, '-' and '_'", ErrHubDomainName, hubDomain)
	case l.Domain == "":
		return fmt.Errorf("%w: Domain is required, unique to this site", ErrDomain)
	case !domainName.MatchString(l.Domain):
		return fmt.Errorf("%w: Domain %q: want letters, digits, '-' and '_'", ErrDomain, l.Domain)
	case l.Domain == hubDomain:
		return fmt.Errorf("%w: %q", ErrSameDomain, l.Domain)
	case (l.TLSCert == "") != (l.TLSKey == ""):
		return ErrTLSPair
	case len(l.URLs) == 0:
		return fmt.Errorf("%w: none given", ErrHubURL)
	}
	_, err := l.urls()
	return err
}

func (l *LeafConfig) urls() ([]*url.URL, error) {
	us := make([]*url.URL, 0, len(l.URLs))
	for i, s := range l.URLs {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, &HubURLError{Index: i, redacted: redact(s)}
		}
		us = append(us, u)
	}
	return us, nil
}

// redact hides the user and password of a URL that does not parse (or
// parses as an opaque one, with no host).
func redact(s string) string {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "xxxxx@" + s[i+1:]
	}
	return s
}
