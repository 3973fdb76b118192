package natsconn_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/jetledger/jetledger/natsconn"
)

// A context saved by the nats CLI, read from a directory of its own, gives
// the Config to connect with.
func ExampleContexts_Load() {
	dir, err := os.MkdirTemp("", "natsconn-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "context"), 0o700); err != nil {
		panic(err)
	}
	ctxJSON := `{"description": "", "url": "nats://prod.example:4222", "user": "app", "password": "pw", "jetstream_domain": "hub", "nsc": ""}`
	if err := os.WriteFile(filepath.Join(dir, "context", "prod.json"), []byte(ctxJSON), 0o600); err != nil {
		panic(err)
	}

	contexts, err := natsconn.NewContexts(natsconn.ContextConfig{Dir: dir})
	if err != nil {
		panic(err)
	}
	c, err := contexts.Load("prod")
	if err != nil {
		panic(err)
	}
	cfg := c.Config()
	fmt.Println(cfg.URL, cfg.User, cfg.Domain)
	fmt.Println(natsconn.RedactURL("nats://app:pw@prod.example:4222"))
	// Output:
	// nats://prod.example:4222 app hub
	// nats://xxxxx@prod.example:4222
}

// A program connects as the nats CLI's user has set up: its own settings
// first, then the NATS_* variables, then the context.
func ExampleResolve() {
	env := map[string]string{"NATS_URL": "nats://env.example:4222", "NATS_USER": "s3cret"}
	cfg, origin, err := natsconn.Resolve(natsconn.Config{Name: "billing"}, natsconn.Sources{
		Getenv:    func(k string) string { return env[k] },
		OnlyNamed: true, // no context named: not the one 'nats context select' chose
	})
	if err != nil {
		panic(err) // a *ConfigError
	}
	fmt.Println(cfg.URL, cfg.Token, cfg.Name, origin.URL)
	// Output:
	// nats://env.example:4222 s3cret billing $NATS_URL
}
