package control

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/store"
)

// Errors of the API-key methods; match them with errors.Is. The error's
// text is the message for the operator.
var (
	// ErrNotAuthorized: the initiator may not manage API keys.
	ErrNotAuthorized = errors.New("not authorized")
	// ErrInvalid: the request is malformed (e.g. an empty identity).
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: no API key has that id.
	ErrNotFound = errors.New("not found")
)

// Any other error means Tollgate could not honour the request now (its
// store or its required audit log failed); nothing was changed.

type opError struct {
	kind error
	msg  string
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.kind }

// API keys
//
// An API key authenticates SASL/PLAIN with user name "token" and the key as
// password, as the principal User:<identity>; all keys of one identity
// share its quotas. Only the key's SHA-256 is stored; the key itself is
// returned once, by CreateAPIKey.
//
// Behavior:
// * Create and revoke need ALTER_CONFIGS on CLUSTER (Authorizer: quota
// admins), like quota alterations; denied: ErrNotAuthorized and a "denied"
// audit event
// * Identity: not empty, at most 1024 bytes of UTF-8 without control
// characters, not ANONYMOUS (ErrInvalid)
// * Revoking an unknown id is ErrNotFound; revoking a revoked key is a
// success that changes nothing
// * Revoked keys stay listed, marked revoked, and no longer authenticate
// * Audit: apikey_create and apikey_revoke events with the key id (the
// target resource "apikey") and the identity, never the key or its hash,
// recorded and synced before the change is committed; a required audit
// sink that cannot take the event refuses the change
// * Effect: a created key authenticates, and a revoked one stops
// authenticating, before the call returns (connections already
// authenticated with a revoked key stay open)
//
// The admin HTTP port manages keys through the same calls, with the
// principal its request authenticated as: the same authorization.

// CreateAPIKey makes an API key for identity. The plaintext key is returned
// once and is never stored.
func (c *Credentials) CreateAPIKey(ctx context.Context, who Initiator, identity string) (string, auth.APIKey, error) {
	return c.createAPIKey(ctx, who, identity)
}

// ListAPIKeys returns every key, revoked ones included, ordered by creation
// time. Each carries its hash, not the key; callers showing keys to people
// should leave the hash out too.
func (c *Credentials) ListAPIKeys() ([]auth.APIKey, error) {
	keys, err := c.Store.APIKeys()
	if err != nil {
		return nil, err
	}
	out := make([]auth.APIKey, len(keys))
	for i, k := range keys {
		out[i] = authAPIKey(k)
	}
	return out, nil
}

// RevokeAPIKey revokes the key with the given id.
func (c *Credentials) RevokeAPIKey(ctx context.Context, who Initiator, id string) error {
	return c.revokeAPIKey(ctx, who, id)
}

// validIdentity is api.CheckIdentity's verdict as the control plane's
// error.
func validIdentity(identity string) error {
	if err := api.CheckIdentity(identity); err != nil {
		return &opError{ErrInvalid, err.Error()}
	}
	return nil
}

func (c *Credentials) createAPIKey(ctx context.Context, who Initiator, identity string) (string, auth.APIKey, error) {
	ev := apiKeyEvent(who, audit.ActionAPIKeyCreate, "", []audit.Change{{Key: "identity", New: audit.String(identity)}})
	if !c.authorize(who, OpAlterConfigs) {
		c.Audit.Record(ctx, withOutcome(ev, audit.Denied, errClusterAuthorizationFailed, msgClusterAuthorizationFailed))
		return "", auth.APIKey{}, &opError{ErrNotAuthorized, who.Principal.String() + " may not create API keys"}
	}
	if err := validIdentity(identity); err != nil {
		c.Audit.Record(ctx, withOutcome(ev, audit.Rejected, errInvalidRequest, err.Error()))
		return "", auth.APIKey{}, err
	}
	plaintext, key, err := auth.NewAPIKey(identity)
	if err != nil {
		c.Audit.Record(ctx, withOutcome(ev, audit.Rejected, errUnknownServerError, err.Error()))
		return "", auth.APIKey{}, err
	}
	ev.Target.Resource.Name = key.ID
	ev.Outcome = audit.Applied
	c.Audit.Prepare(&ev)
	c.mu.Lock()
	defer c.mu.Unlock()
	var auditErr error
	hooked := false
	err = c.Store.PutAPIKeyFunc(storeAPIKey(key), func() error {
		hooked = true
		auditErr = c.Audit.Record(ctx, ev)
		return auditErr
	})
	if err != nil {
		c.followUp(ctx, ev, hooked, auditErr, err)
		return "", auth.APIKey{}, fmt.Errorf("the API key was not created: %w", err)
	}
	c.Load()
	return plaintext, key, nil
}

func (c *Credentials) revokeAPIKey(ctx context.Context, who Initiator, id string) error {
	cur, found, _ := c.Store.APIKey(id)
	ev := apiKeyEvent(who, audit.ActionAPIKeyRevoke, id, revokeChanges(cur, found))
	if !c.authorize(who, OpAlterConfigs) {
		c.Audit.Record(ctx, withOutcome(ev, audit.Denied, errClusterAuthorizationFailed, msgClusterAuthorizationFailed))
		return &opError{ErrNotAuthorized, who.Principal.String() + " may not revoke API keys"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var auditErr error
	hooked := false
	_, err := c.Store.RevokeAPIKeyFunc(id, func(old store.APIKey) error {
		hooked = true
		ev.Changes = revokeChanges(old, true)
		ev.Outcome = audit.Applied
		c.Audit.Prepare(&ev)
		auditErr = c.Audit.Record(ctx, ev)
		return auditErr
	})
	if errors.Is(err, store.ErrNotFound) {
		msg := fmt.Sprintf("API key %q does not exist", id)
		c.Audit.Record(ctx, withOutcome(ev, audit.Rejected, errResourceNotFound, msg))
		return &opError{ErrNotFound, msg}
	}
	if err != nil {
		c.followUp(ctx, ev, hooked, auditErr, err)
		return fmt.Errorf("the API key was not revoked: %w", err)
	}
	c.Load()
	return nil
}

// followUp records what became of an alteration whose commit did not
// happen: a required audit sink refused its event, the commit failed after
// the event, or the store refused it before.
func (c *Credentials) followUp(ctx context.Context, ev audit.Event, hooked bool, auditErr, err error) {
	followUp(ctx, c.Audit, ev, hooked, auditErr, err)
}

// followUp is the follow-up event of a change that was not committed (see
// Credentials.followUp), recorded in log.
func followUp(ctx context.Context, log *audit.Logger, ev audit.Event, hooked bool, auditErr, err error) {
	var follow audit.Event
	switch {
	case auditErr != nil:
		res := auditRefusal(auditErr)
		follow = withOutcome(ev, audit.Rejected, res.code, res.msg)
		follow.Supersedes = ev.ID
	case hooked:
		follow = withOutcome(ev, audit.Failed, errUnknownServerError, "Tollgate could not commit the change: "+err.Error())
		follow.Supersedes = ev.ID
	default:
		follow = withOutcome(ev, audit.Rejected, errUnknownServerError, "Tollgate could not store the change: "+err.Error())
	}
	log.Record(ctx, follow)
}

func apiKeyEvent(who Initiator, action, id string, changes []audit.Change) audit.Event {
	return resourceEvent(who, action, "apikey", id, changes)
}

// resourceEvent is the audit event of an action on one of the control
// plane's own resources (an API key, a tenant).
func resourceEvent(who Initiator, action, typ, name string, changes []audit.Change) audit.Event {
	return audit.Event{
		Action:    action,
		Initiator: who.audit(),
		Target:    audit.Target{Resource: &audit.Resource{Type: typ, Name: name}},
		Changes:   changes,
	}
}

// withOutcome is ev as a new event (its own id and time) with an outcome.
func withOutcome(ev audit.Event, outcome audit.Outcome, code int16, msg string) audit.Event {
	ev.ID, ev.Time = "", time.Time{}
	ev.Outcome, ev.ErrorCode, ev.ErrorMessage = outcome, code, msg
	if ev.Target.Resource != nil {
		r := *ev.Target.Resource
		ev.Target.Resource = &r
	}
	return ev
}

// revokeChanges are the audit changes of revoking k (found false: unknown).
func revokeChanges(k store.APIKey, found bool) []audit.Change {
	if !found {
		return []audit.Change{{Key: "revoked", New: audit.String("true")}}
	}
	return []audit.Change{
		{Key: "identity", Old: audit.String(k.Identity), New: audit.String(k.Identity)},
		{Key: "revoked", Old: audit.String(strconv.FormatBool(k.Revoked)), New: audit.String("true")},
	}
}
