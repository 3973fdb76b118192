package signature_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A receiver that verifies with the package links the standard library
// and the package alone: no SQLite, no NATS, nothing else of jetledger.
func TestLinksOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const self = "github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
	for dep := range strings.FieldsSeq(string(out)) {
		if dep != self {
			t.Errorf("%s imports %s; want the standard library only", self, dep)
		}
	}
}
