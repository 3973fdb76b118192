package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestFieldID(t *testing.T) {
	tests := []struct {
		name, in, field, want string
		wantErr               bool
	}{
		{name: "string", in: `{"id":"evt_1"}`, field: "id", want: "evt_1"},
		{name: "number", in: `{"id":12345678901234567890}`, field: "id", want: "12345678901234567890"},
		{name: "missing", in: `{"x":1}`, field: "id", wantErr: true},
		{name: "empty string", in: `{"id":""}`, field: "id", wantErr: true},
		{name: "object", in: `{"id":{"a":1}}`, field: "id", wantErr: true},
		{name: "not an object", in: `[1,2]`, field: "id", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fieldID([]byte(tt.in), tt.field)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("fieldID = %q, %v; want %q, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestReadLinesRejectsBadLineBeforePublishing(t *testing.T) {
	_, err := readLines(strings.NewReader("{\"a\":1}\n\nnope\n"), "s", "", false)
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want line 3 named", err)
	}
	msgs, err := readLines(strings.NewReader("{\"id\":\"x\"}\n\n{\"id\":\"y\"}\n"), "s", "id", false)
	if err != nil || len(msgs) != 2 || msgs[1].ID != "y" {
		t.Fatalf("msgs = %+v, err %v", msgs, err)
	}
}

func TestEnvironmentFallbackAndPrecedence(t *testing.T) {
	t.Setenv("JETLEDGER_DEADLINE", "soon")
	var stdout, stderr bytes.Buffer
	if code := mainExit(context.Background(), []string{"check"}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, stderr.String())
	}
	if !strings.Contains(stderr.String(), "JETLEDGER_DEADLINE") {
		t.Fatalf("stderr does not name the variable: %s", stderr.String())
	}
	// The command line wins over the environment: this fails later, at connect.
	stderr.Reset()
	code := mainExit(context.Background(), []string{"check", "--deadline", "1s", "--nats", "nats://127.0.0.1:1"}, &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "connect to NATS") {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
}

func TestNoArgumentsPrintsUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := mainExit(context.Background(), nil, &stdout, &stderr); code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stdout.String(), "Commands:") || strings.Contains(stdout.String(), "demo-consumer") {
		t.Fatalf("usage:\n%s", stdout.String())
	}
}
