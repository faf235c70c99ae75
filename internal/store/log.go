package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A Tollgate cluster (internal/cluster) shares this store's contents
// through a compacted topic on the upstream. Every leaf of the file — one
// quota value of one entity, one config of one broker scope, one SCRAM
// credential, one API key, one tenant — is one record of that topic, keyed by where
// the leaf lives (LogKey) and holding the leaf's bytes exactly as this
// file keeps them; a tombstone (nil value) removes it. Records are per
// leaf, not per entity, so that two instances changing different keys of
// one entity at once both keep their change, and the topic's order decides
// between two changing the same key.
//
// With a log attached (SetLog), a write computes its effect in a write
// transaction that is rolled back, appends the leaves it changed to the
// log, and returns once the log has applied them back into this file
// (ApplyLog) — so the file only ever holds what the topic holds, in the
// topic's order, and the change feed fires for changes made through any
// instance.

// LogRecord is one record of the shared log: a leaf's key and its bytes,
// nil for a deleted leaf.
type LogRecord struct {
	Key, Value []byte
}

// SharedLog is the shared configuration log as the store uses it.
type SharedLog interface {
	// CatchUp returns once every change acknowledged before the call is
	// in this file.
	CatchUp(ctx context.Context) error
	// Append writes recs atomically and returns once they are applied to
	// this file.
	Append(ctx context.Context, recs []LogRecord) error
}

// logKeyFormat is the first byte of every log key.
const logKeyFormat = 1

// Meta keys kept for the log.
var (
	keyLogTopic = []byte("log_topic")
	keyLogNext  = []byte("log_next")
)

// logTimeout bounds a write through the log when the caller gives no
// deadline (the store's write methods take no context).
const logTimeout = 15 * time.Second

// errDryRun rolls back the transaction that computed a write's effect.
var errDryRun = errors.New("store: dry run")

// leaf locates one leaf: a top-level bucket, the nested bucket in it (nil:
// none, the leaf is in the top-level bucket), and the key.
type leaf struct {
	top, nested, key []byte
}

// topBuckets are the top-level buckets the log carries.
func topBuckets() [][]byte {
	return [][]byte{bucketQuotas, bucketBrokers, bucketMetrics, bucketScram, bucketAPIKeys, bucketTenants}
}

func knownTop(name []byte) bool {
	for _, b := range topBuckets() {
		if bytes.Equal(b, name) {
			return true
		}
	}
	return false
}

// LogKey encodes where a leaf lives: the format byte, the top-level
// bucket's name and the nested bucket's name, each length-prefixed (the
// nested length is 0 for none and n+1 otherwise), then the leaf's key.
func logKey(l leaf) []byte {
	b := make([]byte, 0, 3+len(l.top)+len(l.nested)+len(l.key)+4)
	b = append(b, logKeyFormat)
	b = binary.AppendUvarint(b, uint64(len(l.top)))
	b = append(b, l.top...)
	if l.nested == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(l.nested))+1)
		b = append(b, l.nested...)
	}
	return append(b, l.key...)
}

func parseLogKey(k []byte) (leaf, error) {
	k0 := k
	bad := fmt.Errorf("store: malformed shared log key of %d bytes", len(k))
	if len(k) < 1 || k[0] != logKeyFormat {
		return leaf{}, bad
	}
	k = k[1:]
	n, m := binary.Uvarint(k)
	if m <= 0 || n > uint64(len(k)-m) {
		return leaf{}, bad
	}
	var l leaf
	l.top, k = k[m:m+int(n)], k[m+int(n):]
	n, m = binary.Uvarint(k)
	if m <= 0 || (n > 0 && n-1 > uint64(len(k)-m)) {
		return leaf{}, bad
	}
	if n > 0 {
		l.nested, k = k[m:m+int(n-1)], k[m+int(n-1):]
	} else {
		k = k[m:]
	}
	l.key = k
	if len(l.key) == 0 || len(l.key) > bolt.MaxKeySize || len(l.nested) > bolt.MaxKeySize {
		return leaf{}, bad
	}
	// One leaf, one key: an overlong length encoding is not the leaf's key.
	if len(logKey(l)) != len(k0) {
		return leaf{}, bad
	}
	return l, nil
}

// SecretLogKey reports whether the shared log's record under key holds a
// secret — a SCRAM credential's salted keys, an API key's hash — which a
// signed Tollgate cluster stores encrypted (internal/cluster/seal.go).
func SecretLogKey(key []byte) bool {
	l, err := parseLogKey(key)
	if err != nil {
		return false
	}
	return bytes.Equal(l.top, bucketScram) || bytes.Equal(l.top, bucketAPIKeys)
}

// logState is what the store keeps of its log.
type logState struct {
	mu  sync.Mutex // one write through the log at a time
	log SharedLog
}

// SetLog makes every later write go through l (nil: write to the file
// directly again).
func (s *Store) SetLog(l SharedLog) {
	s.logs.mu.Lock()
	s.logs.log = l
	s.logs.mu.Unlock()
}

// write runs fn — which changes the file and returns the leaves it
// touched and whether anything changed — in a write transaction. Without
// a log it commits and fires the change feed; with one it rolls back and
// appends the touched leaves' new bytes to the log.
func (s *Store) write(fn func(tx *bolt.Tx) ([]leaf, bool, error)) error {
	s.logs.mu.Lock()
	lg := s.logs.log
	if lg == nil {
		s.logs.mu.Unlock()
		changed := false
		err := s.update(func(tx *bolt.Tx) error {
			var err error
			_, changed, err = fn(tx)
			return err
		})
		if err == nil && changed {
			s.notify()
		}
		return err
	}
	defer s.logs.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), logTimeout)
	defer cancel()
	// Compute the effect from the latest state any instance acknowledged.
	if err := lg.CatchUp(ctx); err != nil {
		return err
	}
	var recs []LogRecord
	err := s.update(func(tx *bolt.Tx) error {
		leaves, changed, err := fn(tx)
		if err != nil {
			return err
		}
		if changed {
			recs = readLeaves(tx, leaves)
		}
		return errDryRun
	})
	if !errors.Is(err, errDryRun) {
		return err
	}
	return lg.Append(ctx, recs)
}

// readLeaves returns the log records of the leaves' current bytes, each
// leaf once.
func readLeaves(tx *bolt.Tx, leaves []leaf) []LogRecord {
	seen := map[string]bool{}
	var out []LogRecord
	for _, l := range leaves {
		k := logKey(l)
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		var v []byte
		if b := tx.Bucket(l.top); b != nil {
			if l.nested != nil {
				b = b.Bucket(l.nested)
			}
			if b != nil {
				if got := b.Get(l.key); got != nil {
					v = bytes.Clone(got)
				}
			}
		}
		out = append(out, LogRecord{Key: k, Value: v})
	}
	return out
}

// applyLeaf writes (v != nil) or deletes one leaf, creating or dropping
// its nested bucket as the file's layout wants (a nested bucket exists
// only while it has a key). It reports whether anything changed.
func applyLeaf(tx *bolt.Tx, l leaf, v []byte) (bool, error) {
	root := tx.Bucket(l.top)
	if root == nil {
		return false, nil
	}
	b := root
	if l.nested != nil {
		b = root.Bucket(l.nested)
	}
	if v == nil {
		if b == nil || b.Get(l.key) == nil {
			return false, nil
		}
		if err := b.Delete(l.key); err != nil {
			return false, err
		}
		if l.nested != nil {
			if k, _ := b.Cursor().First(); k == nil {
				if err := root.DeleteBucket(l.nested); err != nil {
					return false, err
				}
			}
		}
		return true, nil
	}
	if b == nil {
		var err error
		if b, err = root.CreateBucket(l.nested); err != nil {
			return false, err
		}
	}
	if old := b.Get(l.key); old != nil && bytes.Equal(old, v) {
		return false, nil
	}
	return true, b.Put(l.key, v)
}

func putNext(tx *bolt.Tx, next int64) error {
	return tx.Bucket(bucketMeta).Put(keyLogNext, binary.BigEndian.AppendUint64(nil, uint64(next)))
}

// ApplyLog applies records read from the shared log, in order, in one
// transaction, and remembers next as the next offset to read. Records of a
// bucket this build does not know are skipped (a newer instance's); a
// malformed key is an error.
func (s *Store) ApplyLog(recs []LogRecord, next int64) error {
	changed := false
	err := s.update(func(tx *bolt.Tx) error {
		for _, r := range recs {
			l, err := parseLogKey(r.Key)
			if err != nil {
				return err
			}
			if !knownTop(l.top) {
				continue
			}
			c, err := applyLeaf(tx, l, r.Value)
			if err != nil {
				return err
			}
			changed = changed || c
		}
		return putNext(tx, next)
	})
	if err == nil && changed {
		s.notify()
	}
	return err
}

// ReplaceLog makes the shared buckets hold exactly recs — the shared log's
// state read from its start — and remembers topic and next. Leaves the
// file has and the log does not are deleted.
func (s *Store) ReplaceLog(topic string, recs []LogRecord, next int64) error {
	changed := false
	err := s.update(func(tx *bolt.Tx) error {
		want := make(map[string][]byte, len(recs))
		for _, r := range recs {
			l, err := parseLogKey(r.Key)
			if err != nil {
				return err
			}
			if knownTop(l.top) && r.Value != nil {
				want[string(r.Key)] = r.Value
			}
		}
		// Delete what the log does not have.
		for _, l := range allLeaves(tx) {
			if _, ok := want[string(logKey(l))]; !ok {
				if _, err := applyLeaf(tx, l, nil); err != nil {
					return err
				}
				changed = true
			}
		}
		for k, v := range want {
			l, _ := parseLogKey([]byte(k))
			c, err := applyLeaf(tx, l, v)
			if err != nil {
				return err
			}
			changed = changed || c
		}
		if err := tx.Bucket(bucketMeta).Put(keyLogTopic, []byte(topic)); err != nil {
			return err
		}
		return putNext(tx, next)
	})
	if err == nil && changed {
		s.notify()
	}
	return err
}

// allLeaves lists every leaf of the shared buckets.
func allLeaves(tx *bolt.Tx) []leaf {
	var out []leaf
	for _, top := range topBuckets() {
		root := tx.Bucket(top)
		if root == nil {
			continue
		}
		root.ForEach(func(k, v []byte) error {
			k = bytes.Clone(k)
			if v != nil {
				out = append(out, leaf{top: top, key: k})
				return nil
			}
			return root.Bucket(k).ForEach(func(kk, _ []byte) error {
				out = append(out, leaf{top: top, nested: k, key: bytes.Clone(kk)})
				return nil
			})
		})
	}
	return out
}

// LogSeed returns every leaf as a log record when this file has never
// been attached to the shared log named topic, so that the first instance
// of a new Tollgate cluster brings the state it had alone; nil otherwise.
func (s *Store) LogSeed(topic string) ([]LogRecord, error) {
	var out []LogRecord
	err := s.view(func(tx *bolt.Tx) error {
		if t := tx.Bucket(bucketMeta).Get(keyLogTopic); t != nil && string(t) == topic {
			return nil
		}
		out = readLeaves(tx, allLeaves(tx))
		return nil
	})
	return out, err
}

// LogNext returns the shared log's topic this file was last attached to
// and the next offset it would read ("" and -1: never attached).
func (s *Store) LogNext() (string, int64, error) {
	topic, next := "", int64(-1)
	err := s.view(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if t := m.Get(keyLogTopic); t != nil {
			topic = string(t)
		}
		if v := m.Get(keyLogNext); len(v) == 8 {
			next = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return topic, next, err
}
