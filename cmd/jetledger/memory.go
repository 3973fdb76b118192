package main

import (
	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/node"
)

// byteSize is a flag value in bytes, written as a number with an optional
// unit: 96MiB, 100MB, 1GiB, 65536 (node.ParseByteSize).
type byteSize int64

// Decode reads the flag's value for kong.
func (b *byteSize) Decode(ctx *kong.DecodeContext) error {
	v, err := popFlagValue(ctx, "size")
	if err != nil {
		return err
	}
	n, err := node.ParseByteSize(v)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func (b byteSize) String() string { return node.ByteSize(b).String() }

// flag is the size as a flag value; empty for 0.
func (b byteSize) flag() string {
	if b == 0 {
		return ""
	}
	return b.String()
}
