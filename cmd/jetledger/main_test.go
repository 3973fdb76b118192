package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer"
)

func TestFieldID(t *testing.T) {
	t.Parallel()
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
		{name: "longer than a consumer takes", in: `{"id":"` + strings.Repeat("x", consumer.MaxMessageIDLen+1) + `"}`, field: "id", wantErr: true},
		{name: "as long as a consumer takes", in: `{"id":"` + strings.Repeat("x", consumer.MaxMessageIDLen) + `"}`, field: "id", want: strings.Repeat("x", consumer.MaxMessageIDLen)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := fieldID([]byte(tt.in), tt.field)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("fieldID = %q, %v; want %q, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestReadLinesRejectsBadLineBeforePublishing(t *testing.T) {
	t.Parallel()
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

// With no arguments the usage is an error: on standard error, exit 2.
func TestNoArgumentsPrintsUsage(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := mainExit(context.Background(), nil, &stdout, &stderr); code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "Commands:") || strings.Contains(stderr.String(), "demo-consumer") {
		t.Fatalf("stdout %q; stderr (want the usage):\n%s", stdout.String(), stderr.String())
	}
}
