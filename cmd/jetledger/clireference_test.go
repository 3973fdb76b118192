package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"testing"

	"github.com/jetledger/jetledger/internal/kongx"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md from the kong model")

// cliReference is where docs/cli.md, the CLI reference, says it comes from.
var cliReference = kongx.ReferenceConfig{
	Generator:  "cmd/jetledger",
	Regenerate: "go test ./cmd/jetledger -run TestCLIReferenceIsGenerated -update",
}

// TestCLIReferenceIsGenerated: docs/cli.md is what kongx.WriteReference
// makes of the kong model. Regenerate it with
// go test ./cmd/jetledger -run TestCLIReferenceIsGenerated -update.
func TestCLIReferenceIsGenerated(t *testing.T) {
	parser, err := newParser(&cli{}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := kongx.WriteReference(&got, parser.Model, cliReference); err != nil {
		t.Fatal(err)
	}
	const path = "../../docs/cli.md"
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with -update)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("docs/cli.md is not what the kong model generates: run go test ./cmd/jetledger -run TestCLIReferenceIsGenerated -update")
	}
}
