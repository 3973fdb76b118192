package outbox

import "errors"

// ErrInvalidConfig: a Config field is missing or out of range.
var ErrInvalidConfig = errors.New("outbox: invalid configuration")
