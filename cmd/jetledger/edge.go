package main

import (
	"errors"
	"maps"

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/service"
	"github.com/jetledger/jetledger/stream"
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

// validate checks the edge flags (service.Config.CheckEdge); subjects is
// --subjects, which a sourced stream does not take.
func (h hubFlags) validate(external bool, subjects string) error {
	cfg := service.Config{NATS: externalNATS(external), Stream: stream.Config{Subjects: kongx.SplitList(subjects)}, Hub: h.hub()}
	cfg.Node.Leaf = h.leaf()
	return checkEdge(cfg)
}

// leaf is the embedded server's leaf connection to the hub, or nil
// without any of its flags.
func (h hubFlags) leaf() *node.LeafConfig {
	if h.Hub == "" && h.Domain == "" && h.HubCreds == "" && h.HubTLSCA == "" && h.HubTLSCert == "" && h.HubTLSKey == "" {
		return nil
	}
	urls := kongx.SplitList(h.Hub)
	if len(urls) == 0 && h.Hub != "" {
		urls = []string{h.Hub} // no URL in it: refused, as given
	}
	return &node.LeafConfig{URLs: urls, Domain: h.Domain, HubDomain: h.HubDomain, Credentials: h.HubCreds,
		TLSCA: h.HubTLSCA, TLSCert: h.HubTLSCert, TLSKey: h.HubTLSKey, Names: say.Under(runNames.Settings, "Node.Leaf")}
}

// hub is the hub's stream the edge's stream sources, or nil without any
// of its flags.
func (h hubFlags) hub() *service.Hub {
	if h.Hub == "" && h.HubStream == "" && h.HubFilter == "" && h.HubStart == 0 {
		return nil
	}
	return &service.Hub{Stream: h.HubStream, Filter: h.HubFilter, Domain: h.HubDomain, Start: h.HubStart}
}

// externalNATS is a server to connect to when external, for the
// service's checks.
func externalNATS(external bool) *natsconn.Config {
	if !external {
		return nil
	}
	return &natsconn.Config{}
}

// checkEdge is cfg's embedded node, edge and NATS sink checked by the
// service, in the flags' words (edgeNames).
func checkEdge(cfg service.Config) error {
	cfg.Names = runNames
	return settingUsage(cfg.CheckEdge())
}

// edgeNames are the flags that set the service's embedded node, edge and
// NATS sink, and what its refusals call the server to connect to; they
// join runNames.
var edgeNames = map[string]string{
	"DB": "--db", "NATS": "a server to connect to (--nats, $NATS_URL or a named context)", "NATS.URL": "--nats", "NATS.Token": "--nats-token",
	"Node.Listen": "--listen", "Node.StoreDir": "--store-dir", "Node.Token": "--embedded-token", "Node.SyncInterval": "--sync-interval",
	"Node.Leaf.URLs": "--hub-url", "Node.Leaf.Domain": "--edge-domain", "Node.Leaf.HubDomain": "--hub-domain", "Node.Leaf.Credentials": "--hub-creds",
	"Node.Leaf.TLSCA": "--hub-tls-ca", "Node.Leaf.TLSCert": "--hub-tls-cert", "Node.Leaf.TLSKey": "--hub-tls-key",
	"Hub.Stream": "--hub-stream", "Hub.Filter": "--hub-filter", "Hub.Start": "--hub-start-seq", "Stream.Subjects": "--subjects",
	"Effects.Subject": "--effects-subject", "Effects.Stream": "--effects-stream", "Effects.Timeout": "--effects-timeout", "Sink": "--webhook",
}

func init() { maps.Copy(runNames.Settings, edgeNames) }

// settingRefusal is a library's refusal of a setting, printed as its reason.
type settingRefusal struct {
	reason string
	err    error
}

func (r settingRefusal) Error() string { return r.reason }
func (r settingRefusal) Unwrap() error { return r.err }

// settingUsage is err as a usage error when it is a refusal of a setting
// (a *service.ConfigError or *webhook.ConfigError), said in the flags'
// words as the library gives it.
func settingUsage(err error) error {
	var sc *service.ConfigError
	var wc *webhook.ConfigError
	switch {
	case errors.As(err, &sc):
		return usageError{settingRefusal{sc.Reason, err}}
	case errors.As(err, &wc):
		return usageError{settingRefusal{wc.Reason, err}}
	}
	return err
}
