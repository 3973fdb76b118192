package main

import (
	"time"

	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/service"
)

// hubFlags make the embedded server a leaf node of a hub: the edge mode.
type hubFlags struct {
	Hub        string        `name:"hub-url" placeholder:"URL" help:"join this hub as a leaf node (nats-leaf://host:7422, several comma-separated; user:password@ in the URL, or --hub-creds): the embedded server gets its own JetStream domain (--edge-domain) and --stream is created sourcing --hub-stream from the hub, so messages flow down while the link is up and processing never waits on it"`
	HubStream  string        `name:"hub-stream" placeholder:"NAME" help:"with --hub-url: the hub's stream that --stream sources"`
	HubFilter  string        `name:"hub-filter" placeholder:"SUBJECT" help:"with --hub-url: source only the hub's messages on this subject (one site's share, such as orders.site1.>)"`
	HubDomain  string        `name:"hub-domain" default:"hub" placeholder:"NAME" help:"with --hub-url: the hub's JetStream domain"`
	Domain     string        `name:"edge-domain" placeholder:"NAME" help:"with --hub-url (required): this site's JetStream domain, unique per site: the hub reaches the site's streams by it, and two sites with one domain would be served each other's streams"`
	HubCreds   string        `name:"hub-creds" placeholder:"FILE" help:"with --hub-url: credentials file (JWT and seed) for the leaf connection"`
	HubTLSCA   string        `name:"hub-tls-ca" placeholder:"FILE" help:"with --hub-url: CA certificate file to verify the hub"`
	HubTLSCert string        `name:"hub-tls-cert" placeholder:"FILE" help:"with --hub-url: client certificate file for the leaf connection"`
	HubTLSKey  string        `name:"hub-tls-key" placeholder:"FILE" help:"with --hub-url: client key file for the leaf connection"`
	HubReport  time.Duration `name:"hub-status-interval" default:"15s" placeholder:"DURATION" help:"with --hub-url: how often, while the link is up, the site's status goes to the hub's bucket for 'jetledger fleet' (and at once when the link comes back)"`
	HubStart   uint64        `name:"hub-start-seq" placeholder:"SEQ" help:"with --hub-url: when run creates --stream and the ledger has recorded no start for it (a ledger pruned by an earlier jetledger, whose run then refuses to create it), copy --hub-stream from this sequence of it: the first not yet applied (1: its start)"`
}

// leaf is the embedded server's leaf connection to the hub, or nil
// without any of its flags; the service checks it (service.Config.CheckEdge).
func (h hubFlags) leaf() *node.LeafConfig {
	if h.Hub == "" && h.Domain == "" && h.HubCreds == "" && h.HubTLSCA == "" && h.HubTLSCert == "" && h.HubTLSKey == "" {
		return nil
	}
	urls := kongx.SplitList(h.Hub)
	if len(urls) == 0 && h.Hub != "" {
		urls = []string{h.Hub} // no URL in it: refused, as given
	}
	return &node.LeafConfig{URLs: urls, Domain: h.Domain, HubDomain: h.HubDomain, Credentials: h.HubCreds,
		TLSCA: h.HubTLSCA, TLSCert: h.HubTLSCert, TLSKey: h.HubTLSKey}
}

// hub is the hub's stream the edge's stream sources, or nil without any
// of its flags.
func (h hubFlags) hub() *service.Hub {
	if h.Hub == "" && h.HubStream == "" && h.HubFilter == "" && h.HubStart == 0 {
		return nil
	}
	return &service.Hub{Stream: h.HubStream, Filter: h.HubFilter, Domain: h.HubDomain, Start: h.HubStart, Report: h.HubReport}
}
