package service

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/stream"
)

// CheckEdge is the part of Start's check of c that concerns the embedded
// node, the leaf link to a hub and the NATS sink, for a caller that checks
// its settings a part at a time before it takes anything (a command line
// refuses a bad flag before it listens on its metrics port). A refusal is
// a *ConfigError in c.Names' words.
func (c Config) CheckEdge() error {
	c.Node.StoreDir = cmp.Or(c.Node.StoreDir, c.DB+".nats")
	c.Names = c.Names.withDefaults()
	return c.checkEdge()
}

// checkEdge refuses, before any I/O, an embedded node, a leaf link to a
// hub or a NATS sink that the service would refuse later, each named as
// Names says.
func (c Config) checkEdge() error {
	n := c.Names
	switch {
	case c.NATS != nil && c.Node.Token != "":
		return refuse("%s is for the embedded server; with %s use %s", n.Say("Node.Token"), n.Say("NATS.URL"), n.Say("NATS.Token"))
	case c.NATS != nil && c.Node.SyncInterval != 0:
		return refuse("%s is for the embedded server; the server at %s syncs as its own sync_interval says", n.Say("Node.SyncInterval"), n.Say("NATS.URL"))
	case c.NATS == nil:
		// The leaf is checked below, after what the service says of it.
		nc := c.Node
		nc.Leaf, nc.Names = nil, namesOr(say.Under(n.Settings, "Node"), nc.Names)
		if err := nodeRefusal(nc.Validate()); err != nil {
			return err
		}
	}
	if err := c.checkHub(); err != nil {
		return err
	}
	if err := c.checkWebhook(); err != nil {
		return err
	}
	return c.checkEffects()
}

// checkWebhook checks the webhook sink's settings: with each other, then
// as the sink does (webhook.New).
func (c Config) checkWebhook() error {
	n, w := c.Names, c.Webhook
	switch {
	case w == nil:
		return nil
	case c.Sink != nil:
		return refuse("%s and Sink both name the sink; give one", n.Say("Webhook.URL"))
	case w.URL == "" && w.DeleteURL != "":
		return refuse("%s needs %s", n.Say("Webhook.DeleteURL"), n.Say("Webhook.URL"))
	case w.URL == "" && w.LookupURL != "":
		return refuse("%s needs %s", n.Say("Webhook.LookupURL"), n.Say("Webhook.URL"))
	}
	hook := *w
	hook.Names = namesOr(say.Under(n.Settings, "Webhook"), w.Names)
	_, err := webhook.New(hook)
	return asRefusal(err)
}

// asRefusal is a library's refusal of a setting (its package's
// *ConfigError, which says its Refusal in Names' words) as the service's;
// other errors as they are.
func asRefusal(err error) error {
	var r interface{ Refusal() string }
	if errors.As(err, &r) {
		return &ConfigError{Reason: r.Refusal(), Err: err}
	}
	return err
}

// checkHub checks Hub and Node.Leaf together, then the leaf alone
// (node.LeafConfig.Validate).
func (c Config) checkHub() error {
	n, leaf := c.Names, c.Node.Leaf
	if leaf == nil && c.Hub == nil {
		return nil
	}
	urls := n.Say("Node.Leaf.URLs")
	var l node.LeafConfig
	if leaf != nil {
		l = *leaf
		l.Names = namesOr(say.Under(n.Settings, "Node.Leaf"), l.Names)
	}
	if len(l.URLs) == 0 {
		if leaf != nil {
			return nodeRefusal(l.Validate()) // a leaf setting without URLs
		}
		return refuse("%s goes with %s", n.Say(c.Hub.given()), urls)
	}
	switch {
	case c.NATS != nil:
		return refuse("%s makes the embedded server a leaf node, and there is none with %s; make that server the leaf node instead", urls, n.Say("NATS"))
	case c.Hub != nil && len(c.Stream.Subjects) > 0:
		// The hub's messages would reach the stream twice: over the leaf
		// connection by subject, and by sourcing.
		return refuse("with %s, %s sources %s and takes no %s", urls, n.Say("Stream.Name"), n.Say("Hub.Stream"), n.Say("Stream.Subjects"))
	case c.Hub != nil && c.Hub.Stream == "":
		return refuse("%s needs %s, the hub's stream to source", urls, n.Say("Hub.Stream"))
	case c.Hub != nil && c.Hub.Report < 0:
		return refuse("%s %s: must not be negative", n.Say("Hub.Report"), c.Hub.Report)
	}
	return nodeRefusal(l.Validate())
}

// given is the path of the first field of h that is set, for a refusal
// of h without a leaf.
func (h *Hub) given() string {
	switch {
	case h.Stream != "":
		return "Hub.Stream"
	case h.Filter != "":
		return "Hub.Filter"
	case h.Start > 0:
		return "Hub.Start"
	}
	return "Hub"
}

// checkEffects checks the NATS sink's settings.
func (c Config) checkEffects() error {
	n, e := c.Names, c.Effects
	switch {
	case e == nil:
		return nil
	case e.Subject == "" && e.Stream != "":
		return refuse("%s goes with %s", n.Say("Effects.Stream"), n.Say("Effects.Subject"))
	case e.Subject == "":
		return refuse("%s is required", n.Say("Effects.Subject"))
	case c.Sink != nil || c.Webhook != nil:
		other := "Sink"
		if c.Webhook != nil {
			other = "Webhook.URL"
		}
		return refuse("%s and %s both name the sink of %s's effects; give one", n.Say("Effects.Subject"), n.Say(other), n.Program)
	case !stream.LiteralSubject(e.Subject):
		return refuse("%s %q: want one subject without wildcards, such as effects.site1", n.Say("Effects.Subject"), e.Subject)
	case c.Explicit && e.Timeout <= 0:
		return refuse("%s %s: must be positive", n.Say("Effects.Timeout"), e.Timeout)
	case e.Timeout < 0:
		return refuse("%s %s: must not be negative", n.Say("Effects.Timeout"), e.Timeout)
	}
	return nil
}

// namesOr is the names the service passes down, or without any the
// library Config's own.
func namesOr(passed, own map[string]string) map[string]string {
	if passed == nil {
		return own
	}
	return passed
}

// refuse is a *ConfigError.
func refuse(format string, a ...any) error {
	return &ConfigError{Reason: fmt.Sprintf(format, a...)}
}

// nodeRefusal is node's *node.ConfigError as the service's; other errors
// are node.Start's to return.
func nodeRefusal(err error) error {
	var ce *node.ConfigError
	if !errors.As(err, &ce) {
		return nil
	}
	return &ConfigError{Reason: ce.Reason, Err: err}
}
