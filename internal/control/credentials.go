package control

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/store"
)

// Credentials are the SCRAM credentials and API keys Tollgate manages: kept
// in the store, changed through DescribeUserScramCredentials and
// AlterUserScramCredentials (scram.go) and the API-key methods
// (apikeys.go), every change authorized and audited before it is
// committed, and read by the SASL servers through Lookup.
//
// Lookups (Scram, ByID, Lookup) run on every login: they read an immutable
// in-memory snapshot of the store through an atomic pointer, never the
// store itself, and are safe for concurrent use. The snapshot is loaded on
// first use and reloaded after every change made through c, before the
// change's response is returned, so a credential is usable as soon as its
// alteration is acknowledged. If something else writes the same store, run
// Follow to reload on the store's change feed as well.
type Credentials struct {
	Store *store.Store
	// Audit records one event per alteration; nil records nothing. With a
	// required sink, an alteration whose event cannot be written is
	// refused.
	Audit *audit.Logger
	// Authz decides who may describe and alter; nil is Admins{} (nobody
	// alters or lists users).
	Authz Authorizer
	// OnChange, if set, runs after every load of the snapshot — after
	// each change, before its response is returned: the gateway closes
	// the connections of withdrawn credentials there.
	OnChange func()
	// Tenants, when set, lets a tenant's admins describe (not alter)
	// their principals' SCRAM credentials, as kafka-configs does when it
	// describes users (delegate.go).
	Tenants *Tenants

	mu     sync.Mutex // serialises alterations: validation through commit
	loadMu sync.Mutex // serialises snapshot loads
	snap   atomic.Pointer[credSnapshot]
}

// credSnapshot is the store's credentials as the SASL servers use them.
// It is never modified once published.
type credSnapshot struct {
	scram  map[scramKey]auth.ScramCredential
	keys   map[string]auth.APIKey
	shapes map[scramShapeKey]int // census of scram, for auth.Decoys
}

type scramShapeKey struct {
	mechanism string
	shape     auth.ScramShape
}

type scramKey struct{ user, mechanism string }

var emptySnapshot = &credSnapshot{}

// Lookup is the CredentialLookup the SASL servers use: SCRAM credentials,
// PLAIN checked against them, and PLAIN with user "token" checked against
// the API keys.
func (c *Credentials) Lookup() auth.CredentialLookup { return auth.NewLookup(c, c) }

// Scram implements auth.ScramStore.
func (c *Credentials) Scram(user, mechanism string) (auth.ScramCredential, bool) {
	cred, ok := c.snapshot().scram[scramKey{user, mechanism}]
	return cred, ok
}

// ScramShapes implements auth.ShapeCounter: how the stored credentials
// are shaped, so that unknown users are shown the same shape.
func (c *Credentials) ScramShapes(add func(string, auth.ScramShape, int)) {
	for k, n := range c.snapshot().shapes {
		add(k.mechanism, k.shape, n)
	}
}

// ByID implements auth.APIKeys.
func (c *Credentials) ByID(id string) (auth.APIKey, bool) {
	k, ok := c.snapshot().keys[id]
	return k, ok
}

// Load (re)reads the credentials from the store into the snapshot the
// lookups use. On error the snapshot is dropped, and the next lookup
// retries the load.
func (c *Credentials) Load() error {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	s, err := c.read()
	if err != nil {
		c.snap.Store(nil)
		return err
	}
	c.snap.Store(s)
	if c.OnChange != nil {
		c.OnChange()
	}
	return nil
}

// Follow reloads the snapshot after every change the store reports, until
// ctx is done or the store is closed. Needed only when something other
// than c writes the store's credentials.
func (c *Credentials) Follow(ctx context.Context) {
	load := func() { c.Load() }
	c.Store.Follow(ctx, load, load)
}

func (c *Credentials) snapshot() *credSnapshot {
	if s := c.snap.Load(); s != nil {
		return s
	}
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	if s := c.snap.Load(); s != nil {
		return s
	}
	s, err := c.read()
	if err != nil {
		return emptySnapshot // not kept: the next lookup retries
	}
	c.snap.Store(s)
	return s
}

// read builds a snapshot from the store. Records auth cannot parse are
// left out: nobody can log in with them.
func (c *Credentials) read() (*credSnapshot, error) {
	entries, err := c.Store.ScramCredentials()
	if err != nil {
		return nil, err
	}
	keys, err := c.Store.APIKeys()
	if err != nil {
		return nil, err
	}
	s := &credSnapshot{
		scram:  make(map[scramKey]auth.ScramCredential, len(entries)),
		keys:   make(map[string]auth.APIKey, len(keys)),
		shapes: map[scramShapeKey]int{},
	}
	for _, e := range entries {
		cred, err := auth.ParseScramCredential(e.Mechanism, e.Credential)
		if err != nil {
			continue
		}
		s.scram[scramKey{e.User, e.Mechanism}] = cred
		s.shapes[scramShapeKey{e.Mechanism, auth.ShapeOf(cred)}]++
	}
	for _, k := range keys {
		s.keys[k.ID] = authAPIKey(k)
	}
	return s, nil
}

func (c *Credentials) authorize(who Initiator, op Operation) bool {
	if c.Authz == nil {
		return Admins{}.Authorize(who, op)
	}
	return c.Authz.Authorize(who, op)
}

func authAPIKey(k store.APIKey) auth.APIKey {
	return auth.APIKey{ID: k.ID, Identity: k.Identity, Hash: k.Hash, Created: k.Created, Revoked: k.Revoked}
}

func storeAPIKey(k auth.APIKey) store.APIKey {
	return store.APIKey{ID: k.ID, Identity: k.Identity, Hash: k.Hash, Created: k.Created, Revoked: k.Revoked}
}
