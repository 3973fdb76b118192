package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// ErrNoRun: no run answered at the address: nothing consumes the durable
// now (a partition with no owner), or the site cannot be reached.
var ErrNoRun = errors.New("admin: no run answers")

// Call asks endpoint at a with req (marshalled as JSON; nil sends nothing)
// and decodes the answer into resp. A refusal is an *Error with its code;
// no answer is ErrNoRun, naming the subject asked; ctx bounds the wait.
func Call(ctx context.Context, nc *nats.Conn, a Address, endpoint string, req, resp any) error {
	var data []byte
	if req != nil {
		var err error
		if data, err = json.Marshal(req); err != nil {
			return err
		}
	}
	subject := a.Subject(endpoint)
	msg, err := nc.RequestWithContext(ctx, subject, data)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w at %s (site %s, stream %s, durable %s): no run of it is consuming, or the site is not reachable", ErrNoRun, subject, a.Site, a.Stream, a.Durable)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w at %s within the time given: %w", ErrNoRun, subject, err)
	case err != nil:
		return fmt.Errorf("admin: ask %s: %w", subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return &Error{Code: code, Err: errors.New(msg.Header.Get(micro.ErrorHeader))}
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("admin: the answer of %s is not the JSON expected: %w", subject, err)
	}
	return nil
}
