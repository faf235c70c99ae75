package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Buckets of the credentials Tollgate manages (see the layout in store.go):
//
//	scram_credentials  one nested bucket per user, named by the user name's
//	                   bytes; in it, mechanism ("SCRAM-SHA-256", ...) →
//	                   the credential as Kafka's ScramCredentialUtils
//	                   formats it (salt, stored key, server key,
//	                   iterations; never a password)
//	api_keys           key id → JSON of APIKey (the SHA-256 of the key,
//	                   never the key)
var (
	bucketScram   = []byte("scram_credentials")
	bucketAPIKeys = []byte("api_keys")
)

// ErrNotFound is returned when what a change names does not exist.
var ErrNotFound = errors.New("store: not found")

// ErrExists is returned when a record to create already exists.
var ErrExists = errors.New("store: already exists")

// ScramEntry is one stored SCRAM credential.
type ScramEntry struct {
	User      string
	Mechanism string
	// Credential is the credential string (auth.ScramCredential.Format);
	// the store does not interpret it.
	Credential string
}

// ScramChange sets (Delete false) or deletes one user's credential for one
// mechanism.
type ScramChange struct {
	User       string
	Mechanism  string
	Credential string // with Delete false; must not be empty
	Delete     bool
}

// ScramResult is the effect of one ScramChange: the credential string
// before and after (nil: none).
type ScramResult struct {
	User      string
	Mechanism string
	Old, New  *string
	// Changed reports whether anything was written.
	Changed bool
}

// ScramCredentials returns every stored credential ordered by user (bytes)
// then mechanism.
func (s *Store) ScramCredentials() ([]ScramEntry, error) {
	var out []ScramEntry
	err := s.view(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketScram)
		return root.ForEachBucket(func(user []byte) error {
			return root.Bucket(user).ForEach(func(mech, cred []byte) error {
				out = append(out, ScramEntry{User: string(user), Mechanism: string(mech), Credential: string(cred)})
				return nil
			})
		})
	})
	return out, err
}

// ScramCredential returns a user's credential string for a mechanism.
func (s *Store) ScramCredential(user, mechanism string) (string, bool, error) {
	var cred string
	var ok bool
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketScram).Bucket([]byte(user))
		if b == nil {
			return nil
		}
		if v := b.Get([]byte(mechanism)); v != nil {
			cred, ok = string(v), true
		}
		return nil
	})
	return cred, ok, err
}

// AlterScramFunc applies the changes in order, in one transaction: all of
// them or, on error, none. Deleting a credential that does not exist is
// not an error (its result has Old and New nil). before is called inside
// the write transaction once every result is known and before the commit,
// exactly as in AlterClientQuotasFunc: the control plane records its audit
// event there, and an error from it commits nothing and is returned
// unchanged. before must not use the store.
func (s *Store) AlterScramFunc(changes []ScramChange, before func([]ScramResult) error) ([]ScramResult, error) {
	return alterAll(s, bucketScram, changes, alterScram, func(r ScramResult) bool { return r.Changed }, func(r ScramResult) []leaf {
		return []leaf{{top: bucketScram, nested: []byte(r.User), key: []byte(r.Mechanism)}}
	}, before)
}

func alterScram(root *bolt.Bucket, ch ScramChange) (ScramResult, error) {
	r := ScramResult{User: ch.User, Mechanism: ch.Mechanism}
	switch {
	case ch.User == "" || len(ch.User) > bolt.MaxKeySize:
		return r, fmt.Errorf("store: invalid SCRAM user name of %d bytes", len(ch.User))
	case ch.Mechanism == "" || len(ch.Mechanism) > bolt.MaxKeySize:
		return r, fmt.Errorf("store: invalid SCRAM mechanism of %d bytes", len(ch.Mechanism))
	case !ch.Delete && ch.Credential == "":
		return r, errors.New("store: empty SCRAM credential")
	}
	user, mech := []byte(ch.User), []byte(ch.Mechanism)
	b := root.Bucket(user)
	if b != nil {
		if v := b.Get(mech); v != nil {
			old := string(v)
			r.Old = &old
		}
	}
	if ch.Delete {
		if r.Old == nil {
			return r, nil
		}
		if err := b.Delete(mech); err != nil {
			return r, err
		}
		r.Changed = true
		if k, _ := b.Cursor().First(); k == nil {
			if err := root.DeleteBucket(user); err != nil {
				return r, err
			}
		}
		return r, nil
	}
	cred := ch.Credential
	r.New = &cred
	if r.Old != nil && *r.Old == cred {
		return r, nil
	}
	if b == nil {
		var err error
		if b, err = root.CreateBucket(user); err != nil {
			return r, err
		}
	}
	if err := b.Put(mech, []byte(cred)); err != nil {
		return r, err
	}
	r.Changed = true
	return r, nil
}

// APIKey is a stored API key: the fields of auth.APIKey, with the JSON
// names the file keeps. The key itself is never stored, only its SHA-256.
type APIKey struct {
	ID       string    `json:"id"`
	Identity string    `json:"identity"`
	Hash     []byte    `json:"hash"` // base64 in JSON
	Created  time.Time `json:"created"`
	Revoked  bool      `json:"revoked"`
}

// maxAPIKeyID bounds an id so that it is always a valid bbolt key.
const maxAPIKeyID = 256

func validAPIKeyID(id string) error {
	if id == "" || len(id) > maxAPIKeyID {
		return fmt.Errorf("store: invalid API key id of %d bytes", len(id))
	}
	return nil
}

func decodeAPIKey(v []byte) (APIKey, error) {
	var k APIKey
	if err := json.Unmarshal(v, &k); err != nil {
		return APIKey{}, fmt.Errorf("store: corrupt API key record: %w", err)
	}
	return k, nil
}

// APIKeys returns every stored key, revoked ones included, ordered by
// creation time then id.
func (s *Store) APIKeys() ([]APIKey, error) {
	var out []APIKey
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAPIKeys).ForEach(func(_, v []byte) error {
			k, err := decodeAPIKey(v)
			if err != nil {
				return err
			}
			out = append(out, k)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b APIKey) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, err
}

// APIKey returns the key with the given id.
func (s *Store) APIKey(id string) (APIKey, bool, error) {
	var k APIKey
	var ok bool
	err := s.view(func(tx *bolt.Tx) error {
		if validAPIKeyID(id) != nil {
			return nil
		}
		v := tx.Bucket(bucketAPIKeys).Get([]byte(id))
		if v == nil {
			return nil
		}
		var err error
		k, err = decodeAPIKey(v)
		ok = err == nil
		return err
	})
	return k, ok, err
}

// PutAPIKeyFunc stores a new key. A key with the same id is ErrExists
// (keys are never replaced; RevokeAPIKeyFunc is their only change). before,
// if not nil, is called inside the write transaction before the commit, as
// in AlterClientQuotasFunc; its error commits nothing and is returned
// unchanged.
func (s *Store) PutAPIKeyFunc(k APIKey, before func() error) error {
	if err := validAPIKeyID(k.ID); err != nil {
		return err
	}
	if k.Identity == "" {
		return errors.New("store: API key without identity")
	}
	if len(k.Hash) == 0 {
		return errors.New("store: API key without hash")
	}
	data, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return s.write(func(tx *bolt.Tx) ([]leaf, bool, error) {
		b := tx.Bucket(bucketAPIKeys)
		if b.Get([]byte(k.ID)) != nil {
			return nil, false, fmt.Errorf("%w: API key %q", ErrExists, k.ID)
		}
		if err := b.Put([]byte(k.ID), data); err != nil {
			return nil, false, err
		}
		if before != nil {
			if err := before(); err != nil {
				return nil, false, err
			}
		}
		return []leaf{{top: bucketAPIKeys, key: []byte(k.ID)}}, true, nil
	})
}

// RevokeAPIKeyFunc marks a key revoked and returns it as it was before. An
// unknown id is ErrNotFound; revoking a revoked key changes nothing and is
// not an error (the returned key has Revoked set). before, if not nil, is
// called with the key as it was, inside the write transaction before the
// commit, as in AlterClientQuotasFunc.
func (s *Store) RevokeAPIKeyFunc(id string, before func(old APIKey) error) (APIKey, error) {
	var old APIKey
	err := s.write(func(tx *bolt.Tx) ([]leaf, bool, error) {
		if validAPIKeyID(id) != nil {
			return nil, false, fmt.Errorf("%w: API key %q", ErrNotFound, id)
		}
		b := tx.Bucket(bucketAPIKeys)
		v := b.Get([]byte(id))
		if v == nil {
			return nil, false, fmt.Errorf("%w: API key %q", ErrNotFound, id)
		}
		var err error
		if old, err = decodeAPIKey(v); err != nil {
			return nil, false, err
		}
		changed := false
		if !old.Revoked {
			k := old
			k.Revoked = true
			data, err := json.Marshal(k)
			if err != nil {
				return nil, false, err
			}
			if err := b.Put([]byte(id), data); err != nil {
				return nil, false, err
			}
			changed = true
		}
		if before != nil {
			if err := before(old); err != nil {
				return nil, false, err
			}
		}
		return []leaf{{top: bucketAPIKeys, key: []byte(id)}}, changed, nil
	})
	if err != nil {
		return APIKey{}, err
	}
	return old, nil
}
