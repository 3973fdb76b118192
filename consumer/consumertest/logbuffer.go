package consumertest

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer keeps what a logger (or a running command) wrote, safe to
// read while it writes.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Has reports whether s was written.
func (b *LogBuffer) Has(s string) bool { return strings.Contains(b.String(), s) }
