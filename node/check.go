package node

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/natsconn"
)

// domainName is what nats-server accepts as a JetStream domain.
var domainName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// listenAddr is the validated client address.
type listenAddr struct {
	host string
	port int
}

// Validate checks cfg across its fields before any I/O but a stat of the
// leaf's files (LeafConfig.Validate). Start calls it; a program can call
// it early. A refusal is a *ConfigError naming the setting as Names says.
func (cfg Config) Validate() error {
	_, err := cfg.validate()
	return err
}

// validate is Validate, with the client address.
func (cfg Config) validate() (listenAddr, error) {
	if cfg.StoreDir == "" {
		return listenAddr{}, refuse(ErrInvalidConfig, "%s is required", say.Name(cfg.Names, "StoreDir"))
	}
	addr, err := parseListen(cmp.Or(cfg.Listen, DefaultListen), say.Name(cfg.Names, "Listen"))
	if err != nil {
		return listenAddr{}, err
	}
	if err := cfg.checkAuth(addr); err != nil {
		return listenAddr{}, err
	}
	switch {
	case cfg.SyncInterval < 0:
		return listenAddr{}, refuse(ErrInvalidConfig, "%s %s: want 0 (every write) or a positive duration", say.Name(cfg.Names, "SyncInterval"), cfg.SyncInterval)
	case cfg.Leaf != nil:
		if err := cfg.Leaf.Validate(); err != nil {
			return listenAddr{}, err
		}
	}
	return addr, CheckMemoryLimit(cfg.MemoryLimit)
}

// parseListen reads the address of the setting the caller calls name.
func parseListen(listen, name string) (listenAddr, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return listenAddr{}, refuse(ErrInvalidConfig, "%s %q: want host:port", name, listen)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return listenAddr{}, refuse(ErrInvalidConfig, "%s %q: the port must be a number from 0 to 65535", name, listen)
	}
	return listenAddr{host: host, port: port}, nil
}

// Validate checks the leaf's configuration before Start reads its files:
// settings without URLs (ErrHubURL), the domains (ErrDomain,
// ErrHubDomainName, ErrSameDomain), the TLS pair (ErrTLSPair), that the
// files exist (a *LeafFileError for a TLS file), the URLs (a
// *HubURLError). Start calls it; a program can call it early. A refusal
// is a *ConfigError naming the settings as Names says.
func (l *LeafConfig) Validate() error {
	name := func(path string) string { return say.Name(l.Names, path) }
	hubDomain := cmp.Or(l.HubDomain, DefaultHubDomain)
	if err := l.needURLs(); err != nil {
		return err
	}
	switch {
	case !domainName.MatchString(hubDomain):
		return refuse(ErrHubDomainName, "%s %q: want letters, digits, '-' and '_'", name("HubDomain"), hubDomain)
	case l.Domain == "":
		// No default: cloned hosts share a host name, and two sites with
		// one domain silently serve each other's streams to the hub.
		return refuse(ErrDomain, "%s needs %s, a JetStream domain unique to this site (such as site1)", name("URLs"), name("Domain"))
	case !domainName.MatchString(l.Domain):
		return refuse(ErrDomain, "%s %q: want letters, digits, '-' and '_'", name("Domain"), l.Domain)
	case l.Domain == hubDomain:
		return refuse(ErrSameDomain, "%s %q is the hub's domain; each site needs its own", name("Domain"), l.Domain)
	case (l.TLSCert == "") != (l.TLSKey == ""):
		return refuse(ErrTLSPair, "%s and %s go together", name("TLSCert"), name("TLSKey"))
	}
	// The files before the URLs, as a command line names them first.
	for _, f := range []struct{ path, file string }{{"Credentials", l.Credentials}, {"TLSCA", l.TLSCA}, {"TLSCert", l.TLSCert}, {"TLSKey", l.TLSKey}} {
		if _, err := os.Stat(f.file); f.file != "" && err != nil {
			cause := err
			if f.path != "Credentials" {
				cause = &LeafFileError{File: f.file, CA: f.path == "TLSCA", Err: err}
			}
			return &ConfigError{Reason: fmt.Sprintf("%s: %v", name(f.path), err), Err: cause}
		}
	}
	_, err := l.urls()
	return err
}

// needURLs refuses a leaf without URLs, naming a setting given without
// them first.
func (l *LeafConfig) needURLs() error {
	if len(l.URLs) > 0 {
		return nil
	}
	for _, f := range []struct{ path, v string }{{"Domain", l.Domain}, {"Credentials", l.Credentials}, {"TLSCA", l.TLSCA}, {"TLSCert", l.TLSCert}, {"TLSKey", l.TLSKey}} {
		if f.v != "" {
			return refuse(ErrHubURL, "%s goes with %s", say.Name(l.Names, f.path), say.Name(l.Names, "URLs"))
		}
	}
	return refuse(ErrHubURL, "%s: none given", say.Name(l.Names, "URLs"))
}

func (l *LeafConfig) urls() ([]*url.URL, error) {
	us := make([]*url.URL, 0, len(l.URLs))
	for i, s := range l.URLs {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, &ConfigError{Err: &HubURLError{Index: i, redacted: redact(s)},
				Reason: fmt.Sprintf("%s %q: want a URL such as nats-leaf://hub.example:7422", say.Name(l.Names, "URLs"), natsconn.RedactURL(s))}
		}
		us = append(us, u)
	}
	return us, nil
}

// fileError is Start's refusal of a TLS file it read (a *LeafFileError),
// said as Names says.
func (l *LeafConfig) fileError(file string, ca bool, err error) error {
	name := func(path string) string { return say.Name(l.Names, path) }
	reason := fmt.Sprintf("%s/%s: %v", name("TLSCert"), name("TLSKey"), err)
	switch {
	case ca && errors.Is(err, ErrNoPEM):
		reason = fmt.Sprintf("%s %s: no PEM certificate in it", name("TLSCA"), file)
	case ca:
		reason = fmt.Sprintf("%s: %v", name("TLSCA"), err)
	}
	return &ConfigError{Reason: reason, Err: &LeafFileError{File: file, CA: ca, Err: err}}
}

// redact hides the user and password of a URL that does not parse (or
// parses as an opaque one, with no host).
func redact(s string) string {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "xxxxx@" + s[i+1:]
	}
	return s
}
