package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/durable"

	bolt "go.etcd.io/bbolt"
)

// FileName is the name of the database file in the data directory.
const FileName = "tollgate.db"

// schemaVersion is the layout of the file described below; Open refuses a
// file written with another layout.
const schemaVersion = "1"

// Layout of the file:
//
//	meta            schema → "1"
//	client_quotas   one nested bucket per entity, named by encodeEntity;
//	                in it, quota key → 8-byte big-endian IEEE-754 bits
//	broker_configs  one nested bucket per broker scope (encodeBroker);
//	                in it, config key → value
//	client_metrics  one nested bucket per client-metrics subscription,
//	                named by its name; in it, config key → value
//	scram_credentials, api_keys
//	                credentials Tollgate manages (credentials.go)
//	tenants         tenant name → JSON of Tenant (tenants.go)
//
// Values are kept as raw float bits, so every float64 (NaN, ±Inf, -0)
// round-trips exactly. An entity or scope whose last key is removed has
// its bucket deleted: entities exist only while they have a key.
var (
	bucketMeta    = []byte("meta")
	bucketQuotas  = []byte("client_quotas")
	bucketBrokers = []byte("broker_configs")
	bucketMetrics = []byte("client_metrics")
	keySchema     = []byte("schema")
)

// lockTimeout bounds the wait for the file lock bbolt takes, so that a
// second gateway on the same data directory fails instead of hanging.
const lockTimeout = time.Second

// Store is the durable configuration store. Its methods are safe for
// concurrent use; write transactions are serialised by bbolt.
type Store struct {
	// dbMu guards db against Release and Reacquire: every transaction
	// holds it for reading.
	dbMu sync.RWMutex
	db   *bolt.DB // nil while released
	path string

	logs logState // the shared log of a Tollgate cluster (log.go)

	mu     sync.Mutex
	subs   map[chan struct{}]struct{}
	closed bool
}

// Open opens (creating if needed) dir/tollgate.db. The directory is
// created with mode 0700 and the file with 0600. Another process holding
// the file gets an error after one second.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("store: no data directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := openDB(path, lockTimeout)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, path: path, subs: make(map[chan struct{}]struct{})}, nil
}

// openDB opens the file at path, waiting up to wait for another process
// to let go of it, and checks (or writes) its schema.
func openDB(path string, wait time.Duration) (*bolt.DB, error) {
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, fs.ErrNotExist)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: wait})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("store: %s is in use by another process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// bbolt fsyncs every commit unless NoSync is set; an acknowledged
	// change must survive kill -9, so it must stay unset.
	db.NoSync = false
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		switch v := meta.Get(keySchema); {
		case v == nil:
			if err := meta.Put(keySchema, []byte(schemaVersion)); err != nil {
				return err
			}
		case string(v) != schemaVersion:
			return fmt.Errorf("store: %s has schema version %q, this build reads %q", path, v, schemaVersion)
		}
		for _, b := range topBuckets() {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && created {
		// The new file's directory entry must be durable too.
		err = durable.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	return db, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the database and every subscription channel. Transactions in
// progress finish first.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for ch := range s.subs {
			close(ch)
		}
		clear(s.subs)
	}
	s.mu.Unlock()
	return s.Release()
}

// ErrReleased is what every read and write returns while the store's file
// is released to another process (Release).
var ErrReleased = errors.New("store: the data directory is handed over to a new tollgate process; retry")

// Release closes the file without closing the store, so that another
// process (a new binary taking over, see accept.Successor) can open it:
// bbolt lets one process hold it. Transactions in progress finish first;
// until Reacquire every read and write fails with ErrReleased.
// Subscriptions stay open.
func (s *Store) Release() error {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	return err
}

// Reacquire opens the file again after Release, waiting up to wait for
// the other process to let go of it. The other process may have changed
// it meanwhile: subscribers are told, as after a commit.
func (s *Store) Reacquire(wait time.Duration) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("store: closed")
	}
	s.dbMu.Lock()
	if s.db != nil {
		s.dbMu.Unlock()
		return nil
	}
	db, err := openDB(s.path, wait)
	if err != nil {
		s.dbMu.Unlock()
		return err
	}
	s.db = db
	s.dbMu.Unlock()
	s.notify()
	return nil
}

// view runs a read transaction, unless the file is released.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return ErrReleased
	}
	return s.db.View(fn)
}

// update runs a write transaction, unless the file is released.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return ErrReleased
	}
	return s.db.Update(fn)
}

// Follow calls subscribed (if not nil) once it is subscribed — a first
// load there misses no change —, then fn after every committed change
// (coalesced, as Subscribe's signals), until ctx is done or the store is
// closed.
func (s *Store) Follow(ctx context.Context, subscribed, fn func()) {
	ch, cancel := s.Subscribe()
	defer cancel()
	if subscribed != nil {
		subscribed()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			fn()
		}
	}
}

// Subscribe returns a channel that receives a value after every committed
// transaction that changed something, and a function that ends the
// subscription and closes the channel. Signals coalesce: the channel has
// room for one, so a slow reader sees at least one signal after the last
// change, never a backlog. Readers reload what they need from the store.
// Close closes every subscription's channel.
func (s *Store) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		close(ch)
		return ch, func() {}
	}
	s.subs[ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if _, ok := s.subs[ch]; ok {
				delete(s.subs, ch)
				close(ch)
			}
		})
	}
}

func (s *Store) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// EntityQuotas is an entity and every quota key it has.
type EntityQuotas struct {
	Entity Entity
	Values map[string]float64
}

// KeyOp is one change to a key: set it to Value, or remove it.
type KeyOp[V float64 | string] struct {
	Key    string
	Value  V
	Remove bool
}

// Op is one change to a quota key.
type Op = KeyOp[float64]

// EntityChange is a list of ops on one entity, applied in order.
type EntityChange struct {
	Entity Entity
	Ops    []Op
}

// KeyChange is the effect of one op: the key's value before and after.
// Nil means the key is not set. A removal of an unset key has both nil; a
// set to the current value has both equal.
type KeyChange[V float64 | string] struct {
	Key      string
	Old, New *V
}

// ValueChange is the effect of one Op.
type ValueChange = KeyChange[float64]

// EntityResult is the effect of one EntityChange.
type EntityResult struct {
	Entity  Entity
	Changes []ValueChange
	// Changed reports whether anything was written for the entity.
	Changed bool
}

func encodeFloat(v float64) []byte {
	return binary.BigEndian.AppendUint64(nil, math.Float64bits(v))
}

func decodeFloat(b []byte) (float64, error) {
	if len(b) != 8 {
		return 0, errors.New("store: corrupt quota value")
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
}

// ClientQuotas returns every entity with its values, ordered by the
// canonical key.
func (s *Store) ClientQuotas() ([]EntityQuotas, error) {
	var out []EntityQuotas
	err := s.view(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketQuotas)
		return root.ForEachBucket(func(k []byte) error {
			e, err := decodeEntity(k)
			if err != nil {
				return err
			}
			vals, err := readFloats(root.Bucket(k))
			if err != nil {
				return fmt.Errorf("%w (entity %v)", err, e)
			}
			if len(vals) > 0 {
				out = append(out, EntityQuotas{Entity: e, Values: vals})
			}
			return nil
		})
	})
	return out, err
}

// ClientQuota returns the values of one entity; an unknown entity has
// none (an empty map).
func (s *Store) ClientQuota(e Entity) (map[string]float64, error) {
	c, err := NewEntity(e...)
	if err != nil {
		return nil, err
	}
	vals := map[string]float64{}
	err = s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketQuotas).Bucket(c.Key())
		if b == nil {
			return nil
		}
		vals, err = readFloats(b)
		return err
	})
	return vals, err
}

func readFloats(b *bolt.Bucket) (map[string]float64, error) {
	vals := map[string]float64{}
	err := b.ForEach(func(k, v []byte) error {
		f, err := decodeFloat(v)
		if err != nil {
			return err
		}
		vals[string(k)] = f
		return nil
	})
	return vals, err
}

// AlterClientQuotas applies the changes in one transaction: all of them or,
// on error, none. It returns once the transaction is on disk.
func (s *Store) AlterClientQuotas(changes []EntityChange) error {
	_, err := s.AlterClientQuotasFunc(changes, nil)
	return err
}

// AlterClientQuotasFunc is AlterClientQuotas with a hook: once the effect
// of every change is computed inside the write transaction, and before it
// commits, before (if not nil) is called with the results; if it returns an
// error, nothing is committed and that error is returned unchanged. The
// control plane writes its audit event there, so the event is durable
// before the change is, and the old values it records are those the
// transaction replaced (no other write can interleave). before must not
// use the store. The results are returned on success.
func (s *Store) AlterClientQuotasFunc(changes []EntityChange, before func([]EntityResult) error) ([]EntityResult, error) {
	return alterAll(s, bucketQuotas, changes, alterEntity, func(r EntityResult) bool { return r.Changed }, func(r EntityResult) []leaf {
		return leavesOf(bucketQuotas, r.Entity.Key(), r.Changes)
	}, before)
}

func alterEntity(root *bolt.Bucket, ch EntityChange) (EntityResult, error) {
	e, err := NewEntity(ch.Entity...)
	if err != nil {
		return EntityResult{}, err
	}
	key := e.Key()
	if len(key) > bolt.MaxKeySize {
		return EntityResult{}, fmt.Errorf("store: entity encodes to %d bytes, more than the %d a key may have", len(key), bolt.MaxKeySize)
	}
	r := EntityResult{Entity: e}
	r.Changes, r.Changed, err = applyOps(root, key, ch.Ops, "quota", floatCodec)
	return r, err
}

// Broker names the scope of a broker-level config: one broker id, or the
// cluster-wide default (Kafka's config resource with an empty name).
type Broker struct {
	ID      int32
	Default bool
}

// BrokerDefault is the cluster-wide default scope.
func BrokerDefault() Broker { return Broker{Default: true} }

// BrokerID is the scope of one broker.
func BrokerID(id int32) Broker { return Broker{ID: id} }

// String renders the scope as Kafka names the config resource: the broker
// id, or "" for the default.
func (b Broker) String() string {
	if b.Default {
		return ""
	}
	return fmt.Sprint(b.ID)
}

func encodeBroker(b Broker) []byte {
	if b.Default {
		return []byte{'d'}
	}
	return binary.BigEndian.AppendUint32([]byte{'b'}, uint32(b.ID))
}

func decodeBroker(k []byte) (Broker, error) {
	switch {
	case bytes.Equal(k, []byte{'d'}):
		return BrokerDefault(), nil
	case len(k) == 5 && k[0] == 'b':
		return BrokerID(int32(binary.BigEndian.Uint32(k[1:]))), nil
	}
	return Broker{}, errors.New("store: corrupt broker scope key")
}

// BrokerConfigs is one scope's configs.
type BrokerConfigs struct {
	Broker Broker
	Values map[string]string
}

// ConfigOp is one change to a broker config.
type ConfigOp = KeyOp[string]

// BrokerChange is a list of ops on one scope, applied in order.
type BrokerChange struct {
	Broker Broker
	Ops    []ConfigOp
}

// StringChange is the effect of one ConfigOp.
type StringChange = KeyChange[string]

// BrokerResult is the effect of one BrokerChange.
type BrokerResult struct {
	Broker  Broker
	Changes []StringChange
	Changed bool
}

// BrokerConfigs returns every scope that has configs: the default first,
// then brokers by id.
func (s *Store) BrokerConfigs() ([]BrokerConfigs, error) {
	var out []BrokerConfigs
	err := s.readScopes(bucketBrokers, func(k []byte, vals map[string]string) error {
		b, err := decodeBroker(k)
		if err == nil {
			out = append(out, BrokerConfigs{Broker: b, Values: vals})
		}
		return err
	})
	// Keys sort 'b'+id before 'd', and negative ids after positive ones.
	sortBrokers(out)
	return out, err
}

// readScopes calls fn with each nested bucket of top that holds string
// values, and its values.
func (s *Store) readScopes(top []byte, fn func(k []byte, vals map[string]string) error) error {
	return s.view(func(tx *bolt.Tx) error {
		root := tx.Bucket(top)
		return root.ForEachBucket(func(k []byte) error {
			vals := map[string]string{}
			err := root.Bucket(k).ForEach(func(k, v []byte) error {
				vals[string(k)] = string(v)
				return nil
			})
			if err != nil || len(vals) == 0 {
				return err
			}
			return fn(k, vals)
		})
	})
}

func sortBrokers(bs []BrokerConfigs) {
	slices.SortFunc(bs, func(a, b BrokerConfigs) int {
		if a.Broker.Default != b.Broker.Default {
			if a.Broker.Default {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Broker.ID, b.Broker.ID)
	})
}

// SetBrokerConfigs applies the changes in one transaction.
func (s *Store) SetBrokerConfigs(changes []BrokerChange) error {
	_, err := s.SetBrokerConfigsFunc(changes, nil)
	return err
}

// SetBrokerConfigsFunc is SetBrokerConfigs with a hook called before the
// commit, as AlterClientQuotasFunc.
func (s *Store) SetBrokerConfigsFunc(changes []BrokerChange, before func([]BrokerResult) error) ([]BrokerResult, error) {
	return alterAll(s, bucketBrokers, changes, alterBroker, func(r BrokerResult) bool { return r.Changed }, func(r BrokerResult) []leaf {
		return leavesOf(bucketBrokers, encodeBroker(r.Broker), r.Changes)
	}, before)
}

// leavesOf names the keys a change touched, for the shared log.
func leavesOf[V float64 | string](top, nested []byte, cs []KeyChange[V]) []leaf {
	ls := make([]leaf, len(cs))
	for i, c := range cs {
		ls[i] = leaf{top: top, nested: nested, key: []byte(c.Key)}
	}
	return ls
}

func alterBroker(root *bolt.Bucket, ch BrokerChange) (BrokerResult, error) {
	key := encodeBroker(ch.Broker)
	r := BrokerResult{Broker: ch.Broker}
	var err error
	r.Changes, r.Changed, err = applyOps(root, key, ch.Ops, "config", stringCodec)
	return r, err
}

// codec stores one kind of value: its bytes, and whether two values are
// the same.
type codec[V float64 | string] struct {
	encode func(V) []byte
	decode func([]byte) (V, error)
	same   func(a, b V) bool
}

var (
	floatCodec = codec[float64]{encode: encodeFloat, decode: decodeFloat,
		// Equality as Java's Double.equals: by bits.
		same: func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }}
	stringCodec = codec[string]{encode: func(v string) []byte { return []byte(v) },
		decode: func(b []byte) (string, error) { return string(b), nil },
		same:   func(a, b string) bool { return a == b }}
)

// applyOps applies ops, in order, to the nested bucket key of root: it is
// created on the first set and deleted when its last key goes. It returns
// each op's effect and whether anything was written. what names the keys
// in errors.
func applyOps[V float64 | string](root *bolt.Bucket, key []byte, ops []KeyOp[V], what string, c codec[V]) ([]KeyChange[V], bool, error) {
	var changes []KeyChange[V]
	changed := false
	b := root.Bucket(key)
	for _, op := range ops {
		if op.Key == "" || len(op.Key) > bolt.MaxKeySize {
			return changes, changed, fmt.Errorf("store: invalid %s key of %d bytes", what, len(op.Key))
		}
		k := []byte(op.Key)
		var old *V
		if b != nil {
			if v := b.Get(k); v != nil {
				f, err := c.decode(v)
				if err != nil {
					return changes, changed, err
				}
				old = &f
			}
		}
		vc := KeyChange[V]{Key: op.Key, Old: old}
		switch {
		case op.Remove:
			if old != nil {
				if err := b.Delete(k); err != nil {
					return changes, changed, err
				}
				changed = true
			}
		default:
			v := op.Value
			vc.New = &v
			if old != nil && c.same(*old, v) {
				break
			}
			if b == nil {
				var err error
				if b, err = root.CreateBucket(key); err != nil {
					return changes, changed, err
				}
			}
			if err := b.Put(k, c.encode(v)); err != nil {
				return changes, changed, err
			}
			changed = true
		}
		changes = append(changes, vc)
	}
	if b != nil {
		if k, _ := b.Cursor().First(); k == nil {
			if err := root.DeleteBucket(key); err != nil {
				return changes, changed, err
			}
		}
	}
	return changes, changed, nil
}

// alterAll applies changes to one top-level bucket in one write
// transaction: each change through alter, then before (the audit hook) with
// every result, then the commit; on any error nothing is committed. The
// change feed fires if a result says something changed.
func alterAll[C, R any](s *Store, bucket []byte, changes []C, alter func(*bolt.Bucket, C) (R, error),
	changedOf func(R) bool, leavesOf func(R) []leaf, before func([]R) error) ([]R, error) {
	var results []R
	err := s.write(func(tx *bolt.Tx) ([]leaf, bool, error) {
		results = make([]R, 0, len(changes))
		changed := false
		var leaves []leaf
		root := tx.Bucket(bucket)
		for _, ch := range changes {
			r, err := alter(root, ch)
			if err != nil {
				return nil, false, err
			}
			if changedOf(r) {
				changed = true
				leaves = append(leaves, leavesOf(r)...)
			}
			results = append(results, r)
		}
		if before != nil {
			if err := before(results); err != nil {
				return nil, false, err
			}
		}
		return leaves, changed, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}
