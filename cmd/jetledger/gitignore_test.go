package main

import (
	"os/exec"
	"testing"
)

// TestQuickStartLeavesTheCheckoutClean: what the README's quick start makes
// (the ledger, its WAL, the embedded server's store) is ignored by git.
func TestQuickStartLeavesTheCheckoutClean(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	if err := exec.Command(git, "-C", "../..", "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	for _, p := range []string{"payments.db", "payments.db-wal", "payments.db.nats/", "payments.db.nats/jetstream/x"} {
		if err := exec.Command(git, "-C", "../..", "check-ignore", "-q", "--no-index", p).Run(); err != nil {
			t.Errorf("%s is not ignored by .gitignore: %v", p, err)
		}
	}
}
