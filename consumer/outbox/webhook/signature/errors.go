package signature

import "errors"

// Verify's refusals, for errors.Is. Each is wrapped with what was wrong.
var (
	// ErrInvalidConfig: the Verifier has no secret, an empty one, or a
	// negative Tolerance. It is the receiver's mistake, not the request's.
	ErrInvalidConfig = errors.New("signature: invalid verifier configuration")
	// ErrNoSignature: the request has no Jetledger-Signature, or none of
	// its entries is of a version this package checks.
	ErrNoSignature = errors.New("signature: no signature")
	// ErrMalformed: Jetledger-Signature cannot be parsed, or a signed
	// header is given twice or holds a line break.
	ErrMalformed = errors.New("signature: malformed signature header")
	// ErrBadTimestamp: Jetledger-Timestamp is missing or not Unix seconds.
	ErrBadTimestamp = errors.New("signature: bad timestamp")
	// ErrStale: the timestamp is further from now than the tolerance, in
	// the past (a replay) or in the future.
	ErrStale = errors.New("signature: timestamp outside the tolerance")
	// ErrOnlyV1: the request carries only v1 entries, which sign neither
	// the Idempotency-Key nor the message id, and the Verifier does not
	// allow v1.
	ErrOnlyV1 = errors.New("signature: only a v1 signature, which does not sign the idempotency key")
	// ErrBadSignature: no entry matches any of the secrets.
	ErrBadSignature = errors.New("signature: bad signature")
)
