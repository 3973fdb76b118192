package changelog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// OwnersBucket keeps, per partition, where its owner's ledger stood in its
// log when it said so last (RecordOwner: at its take-over, every second
// while it moves, every OwnerRewrite while it does not, and as the owner
// stops). It outlives the log: when the log is gone (deleted,
// or lost with its server), a copy behind what its owner held does not
// begin a new log, as what those entries did (sends, a person's actions)
// is in the owner's file alone. Its keys have no TTL: an owner dead for a
// week still says where it stood.
const OwnersBucket = "JETLEDGER_OWNERS"

// OwnerPosition is where an owner's ledger stood in its log.
type OwnerPosition struct {
	Log   string    `json:"log"`   // the log's instance
	Seq   uint64    `json:"seq"`   // its last entry the owner's file holds
	Owner string    `json:"owner"` // the owner (run name)
	At    time.Time `json:"at"`    // when it said so
}

// Ahead says whether the owner said its ledger held more of pos's log
// than pos does.
func (p OwnerPosition) Ahead(pos ledger.ChangelogPosition) bool {
	return pos.Log != "" && p.Log == pos.Log && p.Seq > pos.Seq
}

// owners opens the bucket, made if need be.
func (l *Log) owners(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := l.js.KeyValue(ctx, OwnersBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = l.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: OwnersBucket, History: 1, Replicas: l.cfg.Replicas,
			Description: "jetledger: where each partition's owner stood in its changelog"})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = l.js.KeyValue(ctx, OwnersBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("changelog: owners bucket %s: %w", OwnersBucket, err)
	}
	return kv, nil
}

// RecordOwner says that owner's ledger holds pos of this log.
func (l *Log) RecordOwner(ctx context.Context, owner string, pos ledger.ChangelogPosition) error {
	kv, err := l.owners(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(OwnerPosition{Log: pos.Log, Seq: pos.Seq, Owner: owner, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, l.name, b); err != nil {
		return fmt.Errorf("changelog: record the owner's position in %s: %w", OwnersBucket, err)
	}
	return nil
}

// lastOwner reads where the partition's owner said its ledger stood last
// (ReadOwner).
func (l *Log) lastOwner(ctx context.Context) (OwnerPosition, error) {
	return readOwner(ctx, l.js, l.name)
}

// ReadOwner reads where the owner of stream's partition durable said its
// ledger stood last: zero when none has said (a bucket or key not there:
// an earlier version, or a person deleted it). A value that is not one
// is a wait (ErrWaiting), for a person to delete the key.
func ReadOwner(ctx context.Context, js jetstream.JetStream, stream, durable string) (OwnerPosition, error) {
	name, _ := Names(stream, durable)
	return readOwner(ctx, js, name)
}

func readOwner(ctx context.Context, js jetstream.JetStream, key string) (OwnerPosition, error) {
	kv, err := js.KeyValue(ctx, OwnersBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return OwnerPosition{}, nil
	}
	var e jetstream.KeyValueEntry
	if err == nil {
		e, err = kv.Get(ctx, key)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return OwnerPosition{}, nil
	}
	if err != nil {
		return OwnerPosition{}, fmt.Errorf("changelog: read the owner's position in %s: %w", OwnersBucket, err)
	}
	var p OwnerPosition
	if err := json.Unmarshal(e.Value(), &p); err != nil || p.Log == "" {
		return OwnerPosition{}, fmt.Errorf("%w: key %s of %s is no owner's position (%v): it says where the partition's owner stood when its log was lost, and nothing can be decided without it; if that owner's host is running, it writes the key again within %v; else have a person delete it (nats kv del %s %s)",
			ErrWaiting, key, OwnersBucket, cmp.Or(err, errors.New("no log named")), OwnerRewrite, OwnersBucket, key)
	}
	return p, nil
}

// OwnerRewrite is how often an owner whose position has not moved writes
// it again: a bucket deleted, or a key overwritten, is mended by then.
const OwnerRewrite = 10 * time.Second

// OwnerKey is the key of this log's partition in OwnersBucket.
func (l *Log) OwnerKey() string { return l.name }
