package lazyfs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
)

// TestOverlayMatchesReference drives the overlay with random writes,
// truncates and syncs, checking reads against a plain byte slice and the
// backing file against the content at the last sync. It needs no FUSE.
func TestOverlayMatchesReference(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		backing, err := os.CreateTemp(t.TempDir(), "backing")
		if err != nil {
			t.Fatal(err)
		}
		initial := randomBytes(rng, rng.IntN(3*pageSize))
		if _, err := backing.Write(initial); err != nil {
			t.Fatal(err)
		}
		d := newFileData(backing, int64(len(initial)))
		visible := bytes.Clone(initial)
		durable := bytes.Clone(initial)

		for step := range 300 {
			switch op := rng.IntN(10); {
			case op < 6:
				off := rng.IntN(4 * pageSize)
				data := randomBytes(rng, rng.IntN(pageSize+100))
				if err := d.write(data, int64(off)); err != nil {
					t.Fatal(err)
				}
				if end := off + len(data); end > len(visible) {
					visible = append(visible, make([]byte, end-len(visible))...)
				}
				copy(visible[off:], data)
			case op < 8:
				size := rng.IntN(4 * pageSize)
				d.truncate(int64(size))
				if size <= len(visible) {
					visible = visible[:size]
				} else {
					visible = append(visible, make([]byte, size-len(visible))...)
				}
			default:
				if err := d.sync(); err != nil {
					t.Fatal(err)
				}
				durable = bytes.Clone(visible)
			}

			buf := make([]byte, 5*pageSize)
			n, err := d.read(buf, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:n], visible) {
				t.Fatalf("seed %d step %d: read %d bytes differing from the %d written", seed, step, n, len(visible))
			}
			onDisk, err := os.ReadFile(backing.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(onDisk, durable) {
				t.Fatalf("seed %d step %d: backing holds %d bytes, not the %d synced", seed, step, len(onDisk), len(durable))
			}
		}
		_ = backing.Close()
	}
}

func TestOverlayPendingBytes(t *testing.T) {
	t.Parallel()
	backing, err := os.CreateTemp(t.TempDir(), "backing")
	if err != nil {
		t.Fatal(err)
	}
	defer backing.Close()
	d := newFileData(backing, 0)
	if d.pending() {
		t.Fatal("new file has pending data")
	}
	// Two writes in one page, one spanning a page boundary.
	for _, w := range []struct{ off, n int }{{10, 5}, {100, 20}, {pageSize - 2, 4}} {
		if err := d.write(make([]byte, w.n), int64(w.off)); err != nil {
			t.Fatal(err)
		}
	}
	// Page 0 spans [10, pageSize); page 1 spans [0, 2).
	if got, want := d.pendingBytes(), int64(pageSize-10+2); got != want {
		t.Errorf("pendingBytes = %d, want %d", got, want)
	}
	if err := d.sync(); err != nil {
		t.Fatal(err)
	}
	if d.pending() || d.pendingBytes() != 0 {
		t.Errorf("after sync: pending=%v, %d bytes", d.pending(), d.pendingBytes())
	}
	d.truncate(1)
	if !d.pending() {
		t.Error("a truncate is not pending")
	}
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
