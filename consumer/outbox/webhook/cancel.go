package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/internal/say"
)

// Cancel cancels the outbox row id (outbox.Cancel), deleting its item at
// the destination through s when it may be there; with s nil (no
// DeleteURL) only a row never sent can be cancelled. A refusal says which
// of a Config's fields would let it through, named as names says (as
// Config.Names).
func Cancel(ctx context.Context, o outbox.Outbox, s *Sink, id string, names map[string]string) (outbox.CancelOutcome, error) {
	var del outbox.Deleter
	if s != nil {
		del = s
	}
	out, err := outbox.Cancel(ctx, o, del, id)
	switch {
	case errors.Is(err, outbox.ErrDeleteUnconfirmed):
		err = fmt.Errorf("%w (%s must name a route that deletes; give %s to confirm an item is gone)", err, say.Name(names, "DeleteURL"), say.Name(names, "LookupURL"))
	case errors.Is(err, outbox.ErrStillAtDestination) && s == nil:
		err = fmt.Errorf("%w (give %s to delete it there)", err, say.Name(names, "DeleteURL"))
	}
	return out, err
}
