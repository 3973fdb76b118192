package changelog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// SnapshotBucket is the object store of the partitions' snapshots: one
// object per partition, the ledger as of a changelog entry.
const SnapshotBucket = "JETLEDGER_SNAPSHOTS"

// Snapshot metadata keys: the log instance and entry the snapshot holds
// last, and where that instance began (ledger.ChangelogOrigin).
const (
	metaLog     = "jetledger-log"
	metaSeq     = "jetledger-seq"
	metaFromLog = "jetledger-from-log"
	metaFromSeq = "jetledger-from-seq"
)

// snapshotInfo is what a stored snapshot holds: its position.
type snapshotInfo struct {
	ledger.ChangelogPosition
	found bool
}

// stored reads the partition's snapshot's position (found false: none).
func (l *Log) stored(ctx context.Context) (snapshotInfo, error) {
	obs, err := l.snapshots(ctx)
	if err != nil {
		return snapshotInfo{}, err
	}
	info, err := obs.GetInfo(ctx, l.name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return snapshotInfo{}, nil
	}
	if err != nil {
		return snapshotInfo{}, fmt.Errorf("changelog: read the snapshot of %s: %w", l.name, err)
	}
	if !belongs(info.Metadata, l.cfg.Stream, l.cfg.Durable) {
		return snapshotInfo{}, fmt.Errorf("%w: the snapshot %s in %s is not of %s/%s", ErrInvalidConfig, l.name, SnapshotBucket, l.cfg.Stream, l.cfg.Durable)
	}
	si := snapshotInfo{found: true}
	si.Log, si.Origin.Log = info.Metadata[metaLog], info.Metadata[metaFromLog]
	si.Seq, _ = strconv.ParseUint(info.Metadata[metaSeq], 10, 64)
	si.Origin.Seq, _ = strconv.ParseUint(info.Metadata[metaFromSeq], 10, 64)
	return si, nil
}

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
	if err := l.copyLogged(ctx, st, copyFile); err != nil {
		return 0, err
	}
	if pos.Log != l.instance {
		return 0, fmt.Errorf("%w: the ledger is a copy of %q, not of %s", ErrNeedSnapshot, pos.Log, l.instance)
	}
	have, err := l.stored(ctx)
	if err != nil {
		return 0, err
	}
	prev := uint64(0)
	switch {
	case have.found && have.Log == l.instance:
		prev = have.Seq
	case have.found && !holdsAtLeast(pos, have.ChangelogPosition):
		// Never replace the one copy others start from with less: this
		// log began from a file behind the snapshot of the instance before.
		return 0, fmt.Errorf("%w: the stored snapshot holds entry %d of %s; this ledger's log began from %q entry %d: it would replace a fuller copy",
			ErrBehindSnapshot, have.Seq, have.Log, pos.Origin.Log, pos.Origin.Seq)
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
	if err := l.put(ctx, copyFile, pos); err != nil {
		return 0, err
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

// put stores the ledger file copyFile as the partition's snapshot of
// entry pos.Seq of this log.
func (l *Log) put(ctx context.Context, copyFile string, pos ledger.ChangelogPosition) error {
	obs, err := l.snapshots(ctx)
	if err != nil {
		return err
	}
	f, err := os.Open(copyFile)
	if err != nil {
		return fmt.Errorf("changelog: snapshot: %w", err)
	}
	defer f.Close()
	meta := jetstream.ObjectMeta{Name: l.name, Description: "jetledger: the ledger of " + l.cfg.Stream + "/" + l.cfg.Durable,
		Metadata: map[string]string{metaLog: l.instance, metaSeq: strconv.FormatUint(pos.Seq, 10),
			metaFromLog: pos.Origin.Log, metaFromSeq: strconv.FormatUint(pos.Origin.Seq, 10),
			MetaStream: l.cfg.Stream, MetaDurable: l.cfg.Durable}}
	if _, err := obs.Put(ctx, meta, f); err != nil {
		return fmt.Errorf("changelog: store the snapshot of %s: %w", l.name, err)
	}
	return nil
}

// Restore puts the partition's latest snapshot at file, if there is one
// (false: none yet). What is at file goes aside (file.replaced-TIME, with
// its -wal), unless it is a copy of the snapshot's own log behind it,
// which the snapshot holds whole: a lifecycle step never destroys a copy
// before a fuller one is beside it. file must not be open.
func (l *Log) Restore(ctx context.Context, file string) (bool, error) {
	have, err := l.stored(ctx)
	if err != nil || !have.found {
		return false, err
	}
	f, err := readFile(ctx, file)
	if err != nil {
		return false, err
	}
	return true, l.restore(ctx, file, have, f)
}

// restore puts the stored snapshot have at file, which holds f.
func (l *Log) restore(ctx context.Context, file string, have snapshotInfo, f fileState) error {
	obs, err := l.snapshots(ctx)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".restore")
	if err := obs.GetFile(ctx, l.name, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("changelog: fetch the snapshot of %s: %w", l.name, err)
	}
	if err := syncPath(tmp); err != nil {
		return err
	}
	if err := l.setAside(ctx, file, have, f); err != nil {
		return err
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("changelog: restore: %w", err)
	}
	return syncPath(filepath.Dir(file))
}

// setAside moves file, holding f, (and its -wal) out of the way of a
// restore, or removes it when the snapshot have holds all of it.
func (l *Log) setAside(ctx context.Context, file string, have snapshotInfo, f fileState) error {
	aside := ""
	if f.exists && !(f.pos.Log == have.Log && f.pos.Seq <= have.Seq) && !f.empty() {
		aside = file + ".replaced-" + time.Now().UTC().Format("20060102T150405.000")
		l.log.WarnContext(ctx, "changelog: the ledger file is set aside, not deleted, for the partition's snapshot", "log", l.name, "db", file, "aside", aside,
			"file_log", f.pos.Log, "file_seq", f.pos.Seq, "snapshot_log", have.Log, "snapshot_seq", have.Seq)
	}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		var err error
		if aside != "" && suffix != "-shm" {
			err = os.Rename(file+suffix, aside+suffix)
		} else {
			err = os.Remove(file + suffix)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("changelog: restore: %w", err)
		}
	}
	return nil
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
	f, err := readFile(ctx, file)
	if err == nil && !f.exists {
		err = fmt.Errorf("changelog: %s: %w", file, os.ErrNotExist)
	}
	return f.pos, err
}

func syncPath(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
