package changelog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// SnapshotBucket is the object store of the partitions' snapshots: one
// object per partition, the ledger as of a changelog entry.
const SnapshotBucket = "JETLEDGER_SNAPSHOTS"

// Snapshot metadata keys.
const (
	metaLog = "jetledger-log"
	metaSeq = "jetledger-seq"
)

// Snapshot stores a consistent copy of st (ledger.Store.Backup) as the
// partition's snapshot, and trims the log behind the snapshot before it:
// a standby a little behind still catches up by entries, and one further
// behind, or new, restores the snapshot (Restore). It returns the entry
// the snapshot holds last.
func (l *Log) Snapshot(ctx context.Context, st *ledger.Store) (uint64, error) {
	dir, err := os.MkdirTemp(filepath.Dir(st.Path()), ".snapshot-")
	if err != nil {
		return 0, fmt.Errorf("changelog: snapshot: %w", err)
	}
	defer os.RemoveAll(dir)
	copyFile := filepath.Join(dir, "ledger.db")
	if _, err := st.Backup(ctx, copyFile, ledger.BackupOptions{}); err != nil {
		return 0, fmt.Errorf("changelog: snapshot: %w", err)
	}
	pos, err := positionOf(ctx, copyFile)
	if err != nil {
		return 0, err
	}
	if pos.Log != l.instance {
		return 0, fmt.Errorf("%w: the ledger is a copy of %q, not of %s", ErrNeedSnapshot, pos.Log, l.instance)
	}
	obs, err := l.snapshots(ctx)
	if err != nil {
		return 0, err
	}
	prev := uint64(0)
	if info, err := obs.GetInfo(ctx, l.name); err == nil && info.Metadata[metaLog] == l.instance {
		prev, _ = strconv.ParseUint(info.Metadata[metaSeq], 10, 64)
	}
	switch {
	case prev > pos.Seq:
		// An owner that lost the log while it copied: replacing the newer
		// snapshot, and trimming behind it, would leave new standbys none
		// to start from.
		return 0, fmt.Errorf("%w: the stored snapshot of %s holds entry %d, this ledger only %d", ErrFenced, l.name, prev, pos.Seq)
	case prev == pos.Seq && prev > 0:
		return pos.Seq, nil // nothing new since
	}
	f, err := os.Open(copyFile)
	if err != nil {
		return 0, fmt.Errorf("changelog: snapshot: %w", err)
	}
	defer f.Close()
	meta := jetstream.ObjectMeta{Name: l.name, Description: "jetledger: the ledger of " + l.cfg.Stream + "/" + l.cfg.Durable,
		Metadata: map[string]string{metaLog: l.instance, metaSeq: strconv.FormatUint(pos.Seq, 10)}}
	if _, err := obs.Put(ctx, meta, f); err != nil {
		return 0, fmt.Errorf("changelog: store the snapshot of %s: %w", l.name, err)
	}
	if prev > 0 {
		s, err := l.js.Stream(ctx, l.name)
		if err == nil {
			// Entries through the previous snapshot: a standby that needs
			// them restores this one instead.
			err = s.Purge(ctx, jetstream.WithPurgeSequence(prev+1))
		}
		if err != nil {
			l.log.WarnContext(ctx, "changelog: trimming the log behind its snapshot failed; tried again at the next", "log", l.name, "err", err)
		}
	}
	return pos.Seq, nil
}

// Restore puts the partition's latest snapshot of this log at file,
// replacing what is there (and its -wal and -shm): for a standby that is
// new or cannot catch up by entries (ErrNeedSnapshot). It says whether
// there was a snapshot; without one there is nothing to restore yet.
// file must not be open.
func (l *Log) Restore(ctx context.Context, file string) (bool, error) {
	obs, err := l.snapshots(ctx)
	if err != nil {
		return false, err
	}
	info, err := obs.GetInfo(ctx, l.name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("changelog: read the snapshot of %s: %w", l.name, err)
	}
	if info.Metadata[metaLog] != l.instance {
		return false, nil // a snapshot of another instance of the log
	}
	tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".restore")
	if err := obs.GetFile(ctx, l.name, tmp); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("changelog: fetch the snapshot of %s: %w", l.name, err)
	}
	if err := syncPath(tmp); err != nil {
		return false, err
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if err := os.Remove(file + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("changelog: restore: %w", err)
		}
	}
	if err := os.Rename(tmp, file); err != nil {
		return false, fmt.Errorf("changelog: restore: %w", err)
	}
	return true, syncPath(filepath.Dir(file))
}

func (l *Log) snapshots(ctx context.Context) (jetstream.ObjectStore, error) {
	obs, err := l.js.ObjectStore(ctx, SnapshotBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = l.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: SnapshotBucket, Replicas: l.cfg.Replicas,
			Storage: jetstream.FileStorage, Description: "jetledger: the partitions' ledger snapshots"})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = l.js.ObjectStore(ctx, SnapshotBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("changelog: snapshot bucket %s: %w", SnapshotBucket, err)
	}
	return obs, nil
}

// positionOf reads the changelog position of the ledger copy at file.
func positionOf(ctx context.Context, file string) (ledger.ChangelogPosition, error) {
	var p ledger.ChangelogPosition
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		return p, err
	}
	defer db.Close()
	var seq int64
	if err := db.QueryRowContext(ctx, `SELECT log, seq, owner FROM jetledger_changelog WHERE id = 1`).Scan(&p.Log, &seq, &p.Owner); err != nil {
		return p, fmt.Errorf("changelog: read the snapshot's position: %w", err)
	}
	p.Seq = uint64(seq)
	return p, nil
}

func syncPath(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
