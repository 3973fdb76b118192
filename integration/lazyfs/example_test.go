package lazyfs_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/jetledger/jetledger/integration/lazyfs"
)

// ExampleFS_PowerCut writes two files, fsyncs one of them and the
// directory, and cuts the power: the synced data survives, the other file's
// name survives without its data. It has no Output line, so go test
// compiles it but does not run it: it needs FUSE, and an example cannot
// skip.
func ExampleFS_PowerCut() {
	backing, err := os.MkdirTemp("", "lazyfs-backing-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(backing)
	mnt, err := os.MkdirTemp("", "lazyfs-mnt-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(mnt)

	fsys, err := lazyfs.Mount(backing, mnt, lazyfs.Options{})
	if err != nil {
		log.Fatal(err) // errors.Is(err, lazyfs.ErrUnavailable) without FUSE
	}
	for name, sync := range map[string]bool{"synced": true, "unsynced": false} {
		f, err := os.Create(filepath.Join(mnt, name))
		if err != nil {
			log.Fatal(err)
		}
		if _, err := f.WriteString("data"); err != nil {
			log.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				log.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			log.Fatal(err)
		}
	}
	dir, err := os.Open(mnt)
	if err != nil {
		log.Fatal(err)
	}
	if err := dir.Sync(); err != nil {
		log.Fatal(err)
	}
	if err := dir.Close(); err != nil {
		log.Fatal(err)
	}

	if err := fsys.PowerCut(); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"synced", "unsynced"} {
		data, err := os.ReadFile(filepath.Join(backing, name))
		fmt.Printf("%s: %q %v\n", name, data, err)
	}
	fmt.Printf("dropped %d bytes in %d files\n", fsys.Stats().DroppedBytes, fsys.Stats().DroppedFiles)
	// Prints:
	// synced: "data" <nil>
	// unsynced: "" <nil>
	// dropped 4 bytes in 1 files
}
