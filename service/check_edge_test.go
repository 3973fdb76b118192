package service

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/stream"
)

// flagNames are a command line's names for the edge's settings.
var flagNames = Names{Program: "run", Settings: map[string]string{
	"DB": "--db", "NATS": "a server (--nats)", "NATS.URL": "--nats", "NATS.Token": "--nats-token", "Stream.Name": "--stream", "Stream.Subjects": "--subjects",
	"Node.Listen": "--listen", "Node.StoreDir": "--store-dir", "Node.Token": "--embedded-token", "Node.SyncInterval": "--sync-interval",
	"Node.Leaf.URLs": "--hub-url", "Node.Leaf.Domain": "--edge-domain", "Hub.Stream": "--hub-stream", "Hub.Filter": "--hub-filter",
	"Hub.Start": "--hub-start-seq", "Effects.Subject": "--effects-subject", "Effects.Stream": "--effects-stream",
	"Effects.Timeout": "--effects-timeout", "Sink": "--webhook", "Webhook.URL": "--webhook", "Webhook.DeleteURL": "--webhook-delete-url",
	"Webhook.LookupURL": "--webhook-lookup-url",
}}

// The edge's settings are refused before any I/O, each named as Names
// says.
func TestCheckEdgeSaysTheCallersNames(t *testing.T) {
	t.Parallel()
	leaf := func() *node.LeafConfig {
		return &node.LeafConfig{URLs: []string{"nats-leaf://h:7422"}, Domain: "site1"}
	}
	ext := &natsconn.Config{}
	tests := []struct {
		name       string
		cfg        Config
		wantReason string // "": accepted
	}{
		{name: "embedded", cfg: Config{}},
		{name: "edge", cfg: Config{Node: node.Config{Leaf: leaf()}, Hub: &Hub{Stream: "H"}}},
		{name: "effects", cfg: Config{Effects: &Effects{Subject: "fx.site1", Stream: "FX"}}},
		{name: "token with NATS", cfg: Config{NATS: ext, Node: node.Config{Token: "t"}},
			wantReason: "--embedded-token is for the embedded server; with --nats use --nats-token"},
		{name: "sync with NATS", cfg: Config{NATS: ext, Node: node.Config{SyncInterval: time.Minute}},
			wantReason: "--sync-interval is for the embedded server; the server at --nats syncs as its own sync_interval says"},
		{name: "bad listen", cfg: Config{Node: node.Config{Listen: "nowhere"}}, wantReason: `--listen "nowhere": want host:port`},
		{name: "bad listen with NATS", cfg: Config{NATS: ext, Node: node.Config{Listen: "nowhere"}}},
		{name: "hub stream without leaf", cfg: Config{Hub: &Hub{Stream: "H"}}, wantReason: "--hub-stream goes with --hub-url"},
		{name: "hub start without leaf", cfg: Config{Hub: &Hub{Start: 5}}, wantReason: "--hub-start-seq goes with --hub-url"},
		{name: "leaf setting without URLs", cfg: Config{Node: node.Config{Leaf: &node.LeafConfig{Domain: "s"}}}, wantReason: "--edge-domain goes with --hub-url"},
		{name: "leaf with NATS", cfg: Config{NATS: ext, Node: node.Config{Leaf: leaf()}, Hub: &Hub{Stream: "H"}},
			wantReason: "--hub-url makes the embedded server a leaf node, and there is none with a server (--nats); make that server the leaf node instead"},
		{name: "hub with subjects", cfg: Config{Node: node.Config{Leaf: leaf()}, Hub: &Hub{Stream: "H"}, Stream: stream.Config{Subjects: []string{"o.>"}}},
			wantReason: "with --hub-url, --stream sources --hub-stream and takes no --subjects"},
		{name: "hub without its stream", cfg: Config{Node: node.Config{Leaf: leaf()}, Hub: &Hub{}}, wantReason: "--hub-url needs --hub-stream, the hub's stream to source"},
		{name: "leaf without domain", cfg: Config{Node: node.Config{Leaf: &node.LeafConfig{URLs: []string{"nats-leaf://h:7422"}}}, Hub: &Hub{Stream: "H"}},
			wantReason: "--hub-url needs --edge-domain, a JetStream domain unique to this site (such as site1)"},
		{name: "effects stream without subject", cfg: Config{Effects: &Effects{Stream: "FX"}}, wantReason: "--effects-stream goes with --effects-subject"},
		{name: "two sinks", cfg: Config{Effects: &Effects{Subject: "fx"}, Sink: RecordOnly("webhook")},
			wantReason: "--effects-subject and --webhook both name the sink of run's effects; give one"},
		{name: "effects and webhook", cfg: Config{Effects: &Effects{Subject: "fx"}, Webhook: &webhook.Config{URL: "http://h/"}},
			wantReason: "--effects-subject and --webhook both name the sink of run's effects; give one"},
		{name: "webhook", cfg: Config{Webhook: &webhook.Config{URL: "http://h/", DeleteURL: "http://h/{external_id}"}}},
		{name: "webhook and sink", cfg: Config{Webhook: &webhook.Config{URL: "http://h/"}, Sink: RecordOnly("x")},
			wantReason: "--webhook and Sink both name the sink; give one"},
		{name: "webhook delete without URL", cfg: Config{Webhook: &webhook.Config{DeleteURL: "http://h/{external_id}"}},
			wantReason: "--webhook-delete-url needs --webhook"},
		{name: "webhook lookup without URL", cfg: Config{Webhook: &webhook.Config{LookupURL: "http://h/{key}"}},
			wantReason: "--webhook-lookup-url needs --webhook"},
		{name: "webhook refused by the sink", cfg: Config{Webhook: &webhook.Config{URL: "ftp://h/"}},
			wantReason: `--webhook "ftp://h/": want an absolute http or https URL`},
		{name: "effects wildcard", cfg: Config{Effects: &Effects{Subject: "fx.>"}},
			wantReason: `--effects-subject "fx.>": want one subject without wildcards, such as effects.site1`},
		{name: "effects negative timeout", cfg: Config{Effects: &Effects{Subject: "fx", Timeout: -time.Second}}, wantReason: "--effects-timeout -1s: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.DB, cfg.Names = "l.db", flagNames
			err := cfg.CheckEdge()
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("CheckEdge: %v, want nil", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Reason != tt.wantReason {
				t.Fatalf("CheckEdge: %v, want a *ConfigError said %q", err, tt.wantReason)
			}
		})
	}
}

// Without Names the refusals name the Config's paths, and Start refuses
// as CheckEdge does.
func TestCheckEdgeNamesThePathsByDefault(t *testing.T) {
	t.Parallel()
	cfg := Config{DB: "l.db", Stream: stream.Config{Name: "S"}, NATS: &natsconn.Config{}, Node: node.Config{Token: "t"}}
	var ce *ConfigError
	if err := cfg.CheckEdge(); !errors.As(err, &ce) || ce.Reason != "Node.Token is for the embedded server; with NATS.URL use NATS.Token" {
		t.Fatalf("CheckEdge: %v", err)
	}
	if _, err := Start(t.Context(), cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Start: %v, want ErrInvalidConfig", err)
	}
}

// Say words the libraries' refusals as Names says, keeping what they are.
func TestSaySaysTheLibrariesRefusals(t *testing.T) {
	t.Parallel()
	// A free port: nothing listens here, but no address of the test is
	// one a user's server may hold.
	addr := fmt.Sprintf("127.0.0.1:%d", consumertest.FreePort(t))
	cfg := Config{Names: flagNames, Node: node.Config{Listen: addr}, Effects: &Effects{Subject: "fx", Stream: "FX"}}
	inUse := &node.StoreInUseError{Dir: "/d", PID: 7, URL: "nats://" + addr}
	listen := &node.ListenError{Addr: addr, Err: syscall.EADDRINUSE}
	taken := &stream.SubjectTakenError{Subject: "fx", By: "OTHER", Want: "FX"}
	leafErr := (&node.LeafConfig{URLs: []string{"nats-leaf://h:7422"}}).Validate()
	tests := []struct {
		name    string
		err     error
		wantErr error
		want    string
	}{
		{"store in use", &StepError{Step: StepNode, Err: inUse}, node.ErrStoreLocked,
			"embedded server store /d is in use by pid 7, serving nats://" + addr + " (lock /d/" + node.LockFile + "): stop that process, or give this one another --db or --store-dir, or connect to the running server with --nats nats://" + addr},
		{"listen", listen, node.ErrListen,
			"embedded server cannot listen on " + addr + ": address already in use; pass --nats URL to use the server already there, or --listen to pick another address"},
		// A node refusal is the service's, its Reason the one node said.
		{"a leaf setting", leafErr, node.ErrDomain, "service: invalid config: URLs needs Domain, a JetStream domain unique to this site (such as site1)"},
		{"effects stream taken", &StepError{Step: StepEffects, Err: taken}, nil, "--effects-subject fx is captured by stream OTHER, not --effects-stream FX"},
		{"no effects stream", ErrNoEffectsStream, ErrNoEffectsStream, "no stream captures --effects-subject fx: create one, or pass --effects-stream NAME to have run create it"},
		{"another error", syscall.EIO, syscall.EIO, syscall.EIO.Error()},
	}
	for _, tt := range tests {
		err := cfg.Say(tt.err)
		if err.Error() != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, err, tt.want)
		}
		if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: %v is not %v", tt.name, err, tt.wantErr)
		}
		if st := (*StepError)(nil); errors.As(tt.err, &st) && err.(*StepError).Step != st.Step { //nolint:errorlint // outermost
			t.Errorf("%s: %T, want the *StepError kept outermost", tt.name, err)
		}
	}
	if err := cfg.Say(leafErr); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a leaf setting: %v, want ErrInvalidConfig", err)
	}
}
