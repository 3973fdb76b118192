package main

import (
	"time"
)

// streamLimitFlags are the limits of the stream --subjects creates. They
// are what lets the ledger shrink: prune keeps a row while a copy of its id
// can still be delivered or replayed, that is while the stream still holds
// it, so only a stream that drops old messages lets rows go.
type streamLimitFlags struct {
	MaxAge   time.Duration `name:"max-age" placeholder:"DURATION" help:"a stream created by --subjects drops messages older than this, consumed or not (default: none; a stream with no limit at all keeps every message, and so the ledger every row)"`
	MaxBytes byteSize      `name:"max-bytes" placeholder:"SIZE" help:"a stream created by --subjects drops its oldest messages past this size, such as 10GiB, consumed or not (default: none)"`
	MaxMsgs  int64         `name:"max-msgs" placeholder:"N" help:"a stream created by --subjects drops its oldest messages past this many, consumed or not (default: none)"`
	Replicas int           `name:"replicas" placeholder:"N" help:"copies of the stream --subjects creates, on as many servers of a cluster: 3 survives the loss of a node (default 1; at most 5)"`
}
