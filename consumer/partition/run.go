package partition

import (
	"context"
	"errors"
	"fmt"
)

// Config says which partitions Run starts and how.
type Config struct {
	// Partitions are the partitions to run, each once, numbered from 0.
	// Required: at least one.
	Partitions []int
	// Start runs partition i until ctx ends or it fails: one consumer with
	// its own ledger (Ledger) and durable (Durable), filtered to its
	// subjects (Filter). Required.
	Start func(ctx context.Context, i int) error
}

func (c Config) validate() error {
	if c.Start == nil || len(c.Partitions) == 0 {
		return fmt.Errorf("%w: want a Start and at least one partition", ErrInvalidConfig)
	}
	seen := map[int]bool{}
	for _, i := range c.Partitions {
		if i < 0 || seen[i] {
			return fmt.Errorf("%w: partition %d is negative or given twice", ErrInvalidConfig, i)
		}
		seen[i] = true
	}
	return nil
}

// Run starts every partition of cfg at once and waits for all of them.
// The first to return, failed or not, stops the others: a process that
// runs several partitions runs all of them or none, for its supervisor to
// restart. It returns the partitions' errors joined, each wrapped with its
// partition number.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(cfg.Partitions))
	for _, i := range cfg.Partitions {
		go func() {
			err := cfg.Start(runCtx, i)
			if err != nil {
				err = fmt.Errorf("partition %d: %w", i, err)
			}
			stop()
			errs <- err
		}()
	}
	var all []error
	for range cfg.Partitions {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
