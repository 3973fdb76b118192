package main

import (
	"errors"

	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/node"
)

// stateOf is the /healthz state an error stands for: health.StateOf, and
// the embedded server's kept write failure.
func stateOf(err error) string {
	if errors.Is(err, node.ErrStoreFailed) {
		return health.StateWriteFailed
	}
	return health.StateOf(err)
}

// storeProbe is the embedded server's store: a write it failed, then the
// disk under it.
func storeProbe(e *node.Node) health.Probe { return health.Store(e.Fault, e.StoreDir()) }
