package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

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
