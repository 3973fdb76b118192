//go:build !linux

package ledger

// walIndexFD cannot find SQLite's descriptor of the WAL index here: every
// tick checkpoints, as before.
type walIndexFD struct{}

func newWALIndexFD(string) *walIndexFD { return &walIndexFD{} }

func (*walIndexFD) read() ([100]byte, bool) { return [100]byte{}, false }
