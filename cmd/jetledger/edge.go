package main

import (
	"errors"
	"os"

	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/node"
)

// hubFlags make the embedded server a leaf node of a hub: the edge mode.
type hubFlags struct {
	Hub        string `name:"hub-url" placeholder:"URL" help:"join this hub as a leaf node (nats-leaf://host:7422, several comma-separated; user:password@ in the URL, or --hub-creds): the embedded server gets its own JetStream domain (--edge-domain) and --stream is created sourcing --hub-stream from the hub, so messages flow down while the link is up and processing never waits on it"`
	HubStream  string `name:"hub-stream" placeholder:"NAME" help:"with --hub-url: the hub's stream that --stream sources"`
	HubFilter  string `name:"hub-filter" placeholder:"SUBJECT" help:"with --hub-url: source only the hub's messages on this subject (one site's share, such as orders.site1.>)"`
	HubDomain  string `name:"hub-domain" default:"hub" placeholder:"NAME" help:"with --hub-url: the hub's JetStream domain"`
	Domain     string `name:"edge-domain" placeholder:"NAME" help:"with --hub-url (required): this site's JetStream domain, unique per site: the hub reaches the site's streams by it, and two sites with one domain would be served each other's streams"`
	HubCreds   string `name:"hub-creds" placeholder:"FILE" help:"with --hub-url: credentials file (JWT and seed) for the leaf connection"`
	HubTLSCA   string `name:"hub-tls-ca" placeholder:"FILE" help:"with --hub-url: CA certificate file to verify the hub"`
	HubTLSCert string `name:"hub-tls-cert" placeholder:"FILE" help:"with --hub-url: client certificate file for the leaf connection"`
	HubTLSKey  string `name:"hub-tls-key" placeholder:"FILE" help:"with --hub-url: client key file for the leaf connection"`
	HubStart   uint64 `name:"hub-start-seq" placeholder:"SEQ" help:"with --hub-url: when run creates --stream and the ledger has recorded no start for it (a ledger pruned by an earlier jetledger, whose run then refuses to create it), copy --hub-stream from this sequence of it: the first not yet applied (1: its start)"`
}

// validate checks the edge flags; subjects is --subjects, which a sourced
// stream does not take. The leaf node's own rules are node.LeafConfig's,
// said here in the flags' terms.
func (h hubFlags) validate(external bool, subjects string) error {
	if h.Hub == "" {
		for flag, v := range map[string]string{"--hub-stream": h.HubStream, "--hub-filter": h.HubFilter, "--edge-domain": h.Domain,
			"--hub-creds": h.HubCreds, "--hub-tls-ca": h.HubTLSCA, "--hub-tls-cert": h.HubTLSCert, "--hub-tls-key": h.HubTLSKey} {
			if v != "" {
				return usagef("%s goes with --hub-url", flag)
			}
		}
		if h.HubStart > 0 {
			return usagef("--hub-start-seq goes with --hub-url")
		}
		return nil
	}
	switch {
	case external:
		return usagef("--hub-url makes the embedded server a leaf node, and there is none with a server to connect to (--nats, $NATS_URL or a named context); make that server the leaf node instead")
	case subjects != "":
		// The hub's messages would reach the stream twice: over the leaf
		// connection by subject, and by sourcing.
		return usagef("with --hub-url, --stream sources --hub-stream and takes no --subjects")
	case h.HubStream == "":
		return usagef("--hub-url needs --hub-stream, the hub's stream to source")
	}
	return h.leafUsage(h.leaf().Validate())
}

// leafUsage says node.LeafConfig's refusal in the flags' terms; the files
// are checked before the URLs, as they were named first.
func (h hubFlags) leafUsage(err error) error {
	switch {
	case errors.Is(err, node.ErrHubDomainName):
		return usagef("--hub-domain %q: want letters, digits, '-' and '_'", h.HubDomain)
	case errors.Is(err, node.ErrDomain) && h.Domain == "":
		// No default: cloned hosts share a host name, and two sites with one
		// domain silently serve each other's streams to the hub.
		return usagef("--hub-url needs --edge-domain, a JetStream domain unique to this site (such as site1)")
	case errors.Is(err, node.ErrDomain):
		return usagef("--edge-domain %q: want letters, digits, '-' and '_'", h.Domain)
	case errors.Is(err, node.ErrSameDomain):
		return usagef("--edge-domain %q is the hub's domain; each site needs its own", h.Domain)
	case errors.Is(err, node.ErrTLSPair):
		return usagef("--hub-tls-cert and --hub-tls-key go together")
	}
	for flag, path := range map[string]string{"--hub-creds": h.HubCreds, "--hub-tls-ca": h.HubTLSCA, "--hub-tls-cert": h.HubTLSCert, "--hub-tls-key": h.HubTLSKey} {
		if _, err := os.Stat(path); path != "" && err != nil {
			return usagef("%s: %v", flag, err)
		}
	}
	var bad *node.HubURLError
	switch {
	case errors.As(err, &bad):
		return usagef("--hub-url %q: want a URL such as nats-leaf://hub.example:7422", redactURL(kongx.SplitList(h.Hub)[bad.Index]))
	case errors.Is(err, node.ErrHubURL):
		return usagef("--hub-url %q: want a URL such as nats-leaf://hub.example:7422", redactURL(h.Hub))
	}
	return err
}

// leaf is the embedded server's leaf connection to the hub.
func (h hubFlags) leaf() *node.LeafConfig {
	return &node.LeafConfig{URLs: kongx.SplitList(h.Hub), Domain: h.Domain, HubDomain: h.HubDomain,
		Credentials: h.HubCreds, TLSCA: h.HubTLSCA, TLSCert: h.HubTLSCert, TLSKey: h.HubTLSKey}
}
