package consumer

import (
	"context"
	"fmt"
)

// ReplayDone reports, for a replay, that every message up to its bound
// (or the end of the stream) has been handled: applied, found a duplicate or
// a conflict, or dead-lettered.
func (c *Consumer) ReplayDone(ctx context.Context) (bool, error) {
	info, err := c.cons.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("consumer: replay progress: %w", err)
	}
	if info.NumAckPending > 0 {
		return false, nil
	}
	// Messages come in stream order: once one past the bound was seen, all
	// before it were delivered, and none of them waits for an ack.
	up := uint64(0)
	if c.cfg.Replay != nil {
		up = c.cfg.Replay.UpTo
	}
	return info.NumPending == 0 || (up > 0 && (info.AckFloor.Stream >= up || c.n.beyond.Load() > 0)), nil
}
