package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/service"
	"github.com/nats-io/nats.go/jetstream"
)

// replay --json writes exactly one JSON object to standard output, however
// long it runs: progress goes to standard error. A poisoned message retried
// with backoff keeps this replay going past the first progress line.
func TestReplayJSONOutputIsJSON(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	ctx := context.Background()
	for i, data := range []string{`{"amount":1}`, `{"amount":-1}`, `{"amount":2}`} {
		if _, err := js.Publish(ctx, "ev.pay", []byte(data), jetstream.WithMsgID(string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	schema := filepath.Join(dir, "schema.sql")
	if err := os.WriteFile(schema, []byte(`CREATE TABLE IF NOT EXISTS paid (amount INTEGER NOT NULL CHECK (amount > 0))`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := mainExit(ctx, []string{"replay", "--nats", srv.ClientURL(), "--db", filepath.Join(dir, "l.db"), "--stream", "EV",
		"--to-seq", "3", "--schema", schema, "--apply", `INSERT INTO paid VALUES (json_extract(:data, '$.amount'))`,
		"--max-deliver", "4", "--json", "--log-level", "error"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var res service.ReplayResult
	dec := json.NewDecoder(&stdout)
	if err := dec.Decode(&res); err != nil || dec.More() {
		t.Fatalf("stdout is not one JSON object (%v):\n%s", err, stdout.String())
	}
	if res.Applied != 2 || res.DeadLetters != 1 {
		t.Fatalf("summary %+v", res)
	}
}
