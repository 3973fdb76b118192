package node

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jetledger/jetledger/internal/say"
	"github.com/nats-io/nats-server/v2/server"
)

// PublishRole is the publishers' access: they may publish to the stream's
// subjects and receive their acks, and nothing else. No stream or consumer
// API but the two a publisher reads (the stream's info and the name
// lookup by subject); no subscription but to its acks, under
// PublisherInboxPrefix. Publishers are in an account of their own
// (PublisherAccount), which reaches the run's only through those
// subjects: a reply subject a publisher names is one of its own account,
// so that neither an ack nor the API's answer can be delivered into one
// of the run's streams.
type PublishRole struct {
	// Tokens are the publishers' credentials: a client giving one of them
	// (nats.Token) has this role. Several, so that one can be replaced
	// while the old is still in use. Default: none (no publisher role).
	Tokens []string
	// Stream is the stream's name, whose info a publisher may read.
	// Required with Tokens.
	Stream string
	// Subjects are the subjects a publisher may publish to: the stream's.
	// Required with Tokens.
	Subjects []string
}

// TLSConfig serves the client listener with TLS: every client but the
// program's own, in-process one, connects with TLS. The zero value: none.
type TLSConfig struct {
	// Cert and Key are the server's certificate and key files (PEM).
	// Required.
	Cert, Key string
	// ClientCA, when set, is a CA file (PEM): every client must present a
	// certificate it signed. Without tokens, such a client may do
	// anything. Default: no client certificates asked for.
	ClientCA string
}

// PublisherInboxPrefix is the inbox prefix a publisher's client must use
// (nats.CustomInboxPrefix; the nats CLI's --inbox-prefix; jetledger
// publish --inbox-prefix): the only subjects it may subscribe to, for its
// acks. Under _INBOX, but not _INBOX.> whole: the replies to every other
// client's requests (an admin's stream info, a replay's messages) stay
// out of its reach.
const PublisherInboxPrefix = "_INBOX.publishers"

// PublisherAccount is the account of the publishers' clients. It has no
// JetStream of its own and imports, as services of the run's account, the
// stream's subjects and the two API subjects a publisher may use. A
// service import sends a request on with a reply subject of the server's
// (_R_...), which it maps back into the importer's account: whatever
// reply a publisher names, the stream's ack and the API's answer are
// delivered in this account, where no stream is. Publishers in the run's
// account had theirs stored in any stream whose subject they named as the
// reply (nats-server checks no permission on a reply subject).
const PublisherAccount = "JETLEDGER_PUBLISHERS"

// Roles, as the server reports a client's user name (Connz).
const (
	roleInternal  = "jetledger-internal"
	roleResponder = "jetledger-admin-api"
	roleAdmin     = "admin"
	rolePublisher = "publisher"
)

// authenticator gives each client its role by the token it presents
// (server.Authentication). The program's own connection is in-process
// with a token made for this start, which no other process can know.
type authenticator struct {
	srv        *server.Server // set after server.NewServer, before Start
	internal   string
	responder  string // the admin API's connection: it answers to inboxes only
	admin      string
	publishers []string
	publish    *server.Permissions
	operators  []string
	viewers    []string
	// pubAcc is PublisherAccount, set by isolate once the server runs:
	// until then a publisher is not let in.
	pubAcc atomic.Pointer[server.Account]
}

// newAuthenticator is cfg's, or nil when cfg asks for no token: no client
// then needs one.
func newAuthenticator(cfg Config) (*authenticator, error) {
	if !cfg.tokens() {
		return nil, nil
	}
	b := make([]byte, 64)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	p := cfg.Publishers
	return &authenticator{internal: hex.EncodeToString(b[:32]), responder: hex.EncodeToString(b[32:]), admin: cfg.Token, publishers: p.Tokens, operators: cfg.Operators, viewers: cfg.Viewers,
		publish: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: append(slices.Clone(p.Subjects),
				"$JS.API.STREAM.INFO."+p.Stream, "$JS.API.STREAM.NAMES")},
			Subscribe: &server.SubjectPermission{Allow: []string{PublisherInboxPrefix + ".>"}},
		}}, nil
}

// Check admits a client that gives a role's token, with that role.
func (a *authenticator) Check(c server.ClientAuthentication) bool {
	tok := c.GetOpts().Token
	switch {
	case equal(tok, a.internal) && inProcess(c):
		return a.register(c, roleInternal, nil)
	case equal(tok, a.responder) && inProcess(c):
		return a.register(c, roleResponder, responderPermissions())
	case a.admin != "" && equal(tok, a.admin):
		return a.register(c, roleAdmin, nil)
	}
	for _, p := range a.publishers {
		if equal(tok, p) {
			acc := a.pubAcc.Load()
			return acc != nil && a.registerIn(c, acc, rolePublisher, a.publish)
		}
	}
	return a.checkRole(c, tok)
}

func (a *authenticator) register(c server.ClientAuthentication, role string, p *server.Permissions) bool {
	return a.registerIn(c, a.srv.GlobalAccount(), role, p)
}

func (a *authenticator) registerIn(c server.ClientAuthentication, acc *server.Account, role string, p *server.Permissions) bool {
	c.RegisterUser(&server.User{Username: role, Account: acc, Permissions: p})
	return true
}

// isolate makes PublisherAccount, which imports from the run's (global)
// account each subject a publisher may publish to, and nothing else. It
// runs once the server has started: an account registered before would
// make nats-server give the global account no JetStream.
func (a *authenticator) isolate() error {
	if len(a.publishers) == 0 {
		return nil
	}
	run := a.srv.GlobalAccount()
	pub, err := a.srv.RegisterAccount(PublisherAccount)
	if err != nil {
		return fmt.Errorf("node: publishers' account: %w", err)
	}
	for _, subj := range a.publish.Publish.Allow {
		if err := run.AddServiceExport(subj, []*server.Account{pub}); err != nil {
			return fmt.Errorf("node: publishers' account: export %s: %w", subj, err)
		}
		if err := pub.AddServiceImport(run, subj, subj); err != nil {
			return fmt.Errorf("node: publishers' account: import %s: %w", subj, err)
		}
	}
	a.pubAcc.Store(pub)
	return nil
}

// inProcess reports a connection made by nats.InProcessServer: a pipe.
func inProcess(c server.ClientAuthentication) bool {
	addr := c.RemoteAddress()
	return addr != nil && addr.Network() == "pipe"
}

// equal compares tokens in constant time.
func equal(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// checkAuth refuses what the roles and TLS need and lack, and a Listen
// that is not loopback with no client authentication (ErrUnauthenticated)
// unless Insecure.
func (cfg Config) checkAuth(addr listenAddr) error {
	name := func(path string) string { return say.Name(cfg.Names, path) }
	p := cfg.Publishers
	switch {
	case slices.Contains(p.Tokens, ""):
		return refuse(ErrInvalidConfig, "%s: a token is empty", name("Publishers.Tokens"))
	case slices.Contains(cfg.Operators, "") || slices.Contains(cfg.Viewers, ""):
		return refuse(ErrInvalidConfig, "%s or %s: a token is empty", name("Operators"), name("Viewers"))
	case sharedToken(cfg):
		return refuse(ErrInvalidConfig, "%s, %s, %s and %s share a token: a client's token is its role", name("Token"), name("Publishers.Tokens"), name("Operators"), name("Viewers"))
	case len(p.Tokens) > 0 && cfg.Leaf != nil:
		return refuse(ErrInvalidConfig, "%s: a leaf node's stream copies the hub's, so its publishers publish at the hub; give them the hub's credentials", name("Publishers.Tokens"))
	case len(p.Tokens) > 0 && p.Stream == "":
		return refuse(ErrInvalidConfig, "%s needs %s: the stream publishers publish to", name("Publishers.Tokens"), name("Publishers.Stream"))
	case len(p.Tokens) > 0 && len(p.Subjects) == 0:
		return refuse(ErrInvalidConfig, "%s needs %s: the stream's subjects, which publishers may publish to", name("Publishers.Tokens"), name("Publishers.Subjects"))
	}
	if err := p.checkSubjects(name("Publishers.Subjects")); err != nil {
		return err
	}
	switch {
	case cfg.TLS.set() && (cfg.TLS.Cert == "" || cfg.TLS.Key == ""):
		return refuse(ErrTLSPair, "%s and %s go together", name("TLS.Cert"), name("TLS.Key"))
	}
	if cfg.TLS.set() {
		for _, f := range []struct{ path, file string }{{"TLS.Cert", cfg.TLS.Cert}, {"TLS.Key", cfg.TLS.Key}, {"TLS.ClientCA", cfg.TLS.ClientCA}} {
			if _, err := os.Stat(f.file); f.file != "" && err != nil {
				return refuse(ErrInvalidConfig, "%s %s: %v", name(f.path), f.file, err)
			}
		}
	}
	authenticated := cfg.tokens() || cfg.TLS.ClientCA != ""
	if !authenticated && !cfg.Insecure && !Loopback(addr.host) {
		return refuse(ErrUnauthenticated, "%s %s is not a loopback address, and a client there would need no credential: anyone who can reach it could delete the stream; give %s (and %s for publishers), or %s on a network you trust",
			name("Listen"), net.JoinHostPort(addr.host, strconv.Itoa(addr.port)), name("Token"), name("Publishers.Tokens"), name("Insecure"))
	}
	return nil
}

// checkSubjects refuses publishers' subjects that reach beyond the
// stream: said names Subjects in the refusal.
func (p PublishRole) checkSubjects(said string) error {
	if len(p.Tokens) == 0 {
		return nil
	}
	for i, subj := range p.Subjects {
		// A first token that is a wildcard, $ (the JetStream and system
		// APIs, the run's lease, fleet and snapshot buckets), _INBOX or
		// _JETLEDGER (the run's changelogs and its own inboxes) would let
		// a publisher delete the stream, read the replies to others'
		// requests or fence the run.
		first, _, _ := strings.Cut(subj, ".")
		if first == "*" || first == ">" || strings.HasPrefix(first, "$") || strings.HasPrefix(first, "_INBOX") || strings.HasPrefix(first, "_JETLEDGER") {
			return refuse(ErrInvalidConfig, "%s %q: a publisher may publish only to subjects whose first token is a name (not *, >, $..., _INBOX... or _JETLEDGER...): %q would reach the JetStream API or the run's own subjects", said, subj, subj)
		}
		// Each subject is imported into the run's account on its own: a
		// publish to two that overlap would be stored twice.
		for _, other := range p.Subjects[:i] {
			if server.SubjectsCollide(subj, other) {
				return refuse(ErrInvalidConfig, "%s %q and %q overlap: a stream's subjects do not", said, other, subj)
			}
		}
	}
	return nil
}

// Loopback reports a host only this machine can reach ("localhost" or a
// loopback address): what a listen without credentials may take.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// set reports a TLS config that asks for TLS: it names a file.
func (t TLSConfig) set() bool { return t.Cert != "" || t.Key != "" || t.ClientCA != "" }

// caPool reads a CA file (PEM); one with no certificate is ErrNoPEM.
func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, ErrNoPEM
	}
	return pool, nil
}

// serverTLS is the client listener's TLS, its files read.
func (t TLSConfig) serverTLS(names map[string]string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, refuse(ErrInvalidConfig, "%s %s: %v", say.Name(names, "TLS.Cert"), t.Cert, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.ClientCA != "" {
		tc.ClientCAs, err = caPool(t.ClientCA)
		switch {
		case errors.Is(err, ErrNoPEM):
			return nil, refuse(ErrNoPEM, "%s %s: no PEM certificate in it", say.Name(names, "TLS.ClientCA"), t.ClientCA)
		case err != nil:
			return nil, refuse(ErrInvalidConfig, "%s %s: %v", say.Name(names, "TLS.ClientCA"), t.ClientCA, err)
		}
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// tokens says whether cfg gives any role a token.
func (cfg Config) tokens() bool {
	return cfg.Token != "" || len(cfg.Publishers.Tokens) > 0 || len(cfg.Operators) > 0 || len(cfg.Viewers) > 0
}

// sharedToken says whether two roles share a token: a client's token is
// its role.
func sharedToken(cfg Config) bool {
	roleOf := map[string]int{}
	for role, tokens := range [][]string{{cfg.Token}, cfg.Publishers.Tokens, cfg.Operators, cfg.Viewers} {
		for _, t := range tokens {
			if r, ok := roleOf[t]; t != "" && ok && r != role {
				return true
			}
			roleOf[t] = role
		}
	}
	return false
}
