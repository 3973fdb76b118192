package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jetledger/jetledger/internal/say"
)

// Scratch is a node in a temporary directory: a throwaway JetStream for a
// demo, a benchmark or a test.
type Scratch struct {
	*Node
	// Dir is the temporary directory; the store is in Dir/nats.
	Dir string
}

// StartScratch starts a node whose store is in a new temporary directory
// named after name, listening on a free port of 127.0.0.1 unless
// cfg.Listen says otherwise. cfg.StoreDir must be empty.
func StartScratch(ctx context.Context, name string, cfg Config) (*Scratch, error) {
	if cfg.StoreDir != "" {
		return nil, refuse(ErrInvalidConfig, "%s %q: a scratch node makes its own", say.Name(cfg.Names, "StoreDir"), cfg.StoreDir)
	}
	dir, err := os.MkdirTemp("", "jetledger-"+name+"-*")
	if err != nil {
		return nil, fmt.Errorf("node: scratch: %w", err)
	}
	cfg.StoreDir = filepath.Join(dir, "nats")
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	n, err := Start(ctx, cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Scratch{Node: n, Dir: dir}, nil
}

// Remove closes the node and removes its directory.
func (s *Scratch) Remove() error {
	s.Close()
	return os.RemoveAll(s.Dir)
}

// Finish stops the node and removes its directory, or with keep leaves
// the directory and says on report where it is.
func (s *Scratch) Finish(keep bool, report io.Writer) {
	if !keep {
		s.Remove()
		return
	}
	s.Close()
	fmt.Fprintf(report, "kept %s\n", s.Dir)
}
