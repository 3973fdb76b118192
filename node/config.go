package node

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ackwait"
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
	// Token, when set, is the admin's credential: a client that gives it
	// (nats.Token) may do anything, delete the stream included. With
	// Token or Publishers.Tokens set, every client needs a token; the
	// program's own connection (Conn, JetStream) is in-process with one of
	// its own. Default: none.
	Token string
	// Publishers are the clients that may only publish to the stream.
	// Default: none.
	Publishers PublishRole
	// Operators are the tokens of the clients that may use the admin API
	// (package admin) and read the streams' and consumers' state, and
	// delete nothing; they subscribe under OperatorInboxPrefix. Default:
	// none.
	Operators []string
	// Viewers are the tokens of the clients that may only read through the
	// admin API; they subscribe under ViewerInboxPrefix. Default: none.
	Viewers []string
	// TLS, when it names a file, serves the client listener with TLS.
	// Default: plain TCP, a token in clear text.
	TLS TLSConfig
	// Insecure lets a Listen that is not a loopback address take clients
	// that give no credential: for a network you trust. Start warns of it
	// every time. Default false: such a Listen needs Token,
	// Publishers.Tokens or TLS.ClientCA (ErrUnauthenticated).
	Insecure bool
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
	// Names say the settings in the caller's words in a refusal
	// (*ConfigError): a setting's path in Config ("Listen") to the
	// caller's name for it ("--listen"). A path not in it is said as
	// itself. Leaf's are its own Names.
	Names map[string]string
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
	// Names say the settings in the caller's words in a refusal, as
	// Config.Names does: a path in LeafConfig ("Domain") to the caller's
	// name ("--edge-domain").
	Names map[string]string
}

// DefaultHubDomain is the hub's JetStream domain of a LeafConfig without one.
const DefaultHubDomain = "hub"

// leafReconnect is how soon the leaf connection is tried again after the
// link drops: the hub's messages wait for it. A variable so that a test
// can run many link drops quickly.
var leafReconnect = time.Second

// ParseSyncInterval reads a SyncInterval written as a command line or a
// config file gives it: "always" (0, every write synced) or a positive
// duration such as 2m (ackwait.ParseDuration).
func ParseSyncInterval(s string) (time.Duration, error) {
	if strings.EqualFold(s, "always") {
		return 0, nil
	}
	d, err := ackwait.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want always or a positive duration such as 2m", s)
	}
	return d, nil
}
