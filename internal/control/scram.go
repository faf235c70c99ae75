package control

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"slices"
	"strconv"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/store"
)

// Kafka error codes of the SCRAM credential APIs, from kerr.
var (
	errUnsupportedSaslMechanism = kerr.UnsupportedSaslMechanism.Code
	errResourceNotFound         = kerr.ResourceNotFound.Code
	errDuplicateResource        = kerr.DuplicateResource.Code
	errUnacceptableCredential   = kerr.UnacceptableCredential.Code
)

// Kafka's messages (ScramImage.describe, ScramControlManager).
const (
	msgDescribeNotFound  = "Attempt to describe a user credential that does not exist: "
	msgDescribeDuplicate = "Cannot describe SCRAM credentials for the same user twice in a single request: "
	msgAlteredTwice      = "A user credential cannot be altered twice in the same request"
	msgDeleteNotFound    = "Attempt to delete a user credential that does not exist"
	msgEmptyUsername     = "Username must not be empty"
	msgUnknownMechanism  = "Unknown SCRAM mechanism"
	msgTooFewIterations  = "Too few iterations"
	msgTooManyIterations = "Too many iterations"
)

// scramMechanismName is Kafka's ScramMechanism.fromType: 1 is SCRAM-SHA-256,
// 2 is SCRAM-SHA-512, anything else UNKNOWN.
func scramMechanismName(t int8) (string, bool) {
	switch t {
	case 1:
		return auth.MechanismScramSHA256, true
	case 2:
		return auth.MechanismScramSHA512, true
	}
	return "", false
}

func scramMechanismType(name string) int8 {
	switch name {
	case auth.MechanismScramSHA256:
		return 1
	case auth.MechanismScramSHA512:
		return 2
	}
	return 0
}

// scramMechanismLabel names a wire mechanism in audit events.
func scramMechanismLabel(t int8) string {
	if n, ok := scramMechanismName(t); ok {
		return n
	}
	return "UNKNOWN(" + strconv.Itoa(int(t)) + ")"
}

// DescribeUserScramCredentials: v0
//
// KIP-554: the SCRAM credentials of users (mechanism and iteration count
// only; salts and keys never leave the server).
//
// Behavior:
// * ACL: DESCRIBE on CLUSTER (KafkaApis.handleDescribeUserScramCredentialsRequest;
// Authorizer: the quota admins only — the list of users is who can log
// in); denied: 31 with a null message for the whole response and one
// result per requested user, also 31 with a null message and an empty user
// name (Kafka's getErrorResponse: ApiError.fromThrowable leaves the
// generic message out)
// * Users null or empty: every user that has a credential
// * A user listed twice: one result, 92 "Cannot describe SCRAM credentials
// for the same user twice in a single request: <user>"
// * A user without credentials: 91 "Attempt to describe a user credential
// that does not exist: <user>" (the empty name included)
// * Results in the order of Kafka's HashMap of the distinct users; each
// user's credentials SCRAM-SHA-256 then SCRAM-SHA-512
//
// Where Tollgate differs from Kafka:
// * Tollgate answers from its own store: these are the credentials clients
// authenticate with at the gateway, not the upstream cluster's
// * Null Users on a denied request answers 31 without results (Kafka fails
// to build that response)
// * The order of a user's mechanisms is fixed (Kafka's follows a HashMap of
// enum constants, which varies between runs)
// * A store read failure answers -1 UNKNOWN_SERVER_ERROR for the response
func (c *Credentials) DescribeUserScramCredentials(ctx context.Context, who Initiator, req *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	dl, ok := c.scramDescriber(ctx, who, req)
	if !ok {
		resp.ErrorCode = errClusterAuthorizationFailed
		for range req.Users {
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.ErrorCode = errClusterAuthorizationFailed
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	entries, err := c.Store.ScramCredentials()
	if err != nil {
		resp.ErrorCode = errUnknownServerError
		resp.ErrorMessage = kmsg.StringPtr("Tollgate could not read its store: " + err.Error())
		return resp
	}
	infos, all := scramInfos(entries)
	users, dup := describedUsers(req, all, dl)
	for _, u := range users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u
		switch {
		case dup[u]:
			r.ErrorCode = errDuplicateResource
			r.ErrorMessage = kmsg.StringPtr(msgDescribeDuplicate + u)
		case len(infos[u]) == 0:
			r.ErrorCode = errResourceNotFound
			r.ErrorMessage = kmsg.StringPtr(msgDescribeNotFound + u)
		default:
			r.CredentialInfos = infos[u]
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// scramDescriber says whether who may describe the credentials req asks
// for: ok, as a quota admin (dl nil), or as the admin of a tenant whose
// principals they are all (dl, delegate.go). A tenant's admin asking for
// more is audited as denied.
func (c *Credentials) scramDescriber(ctx context.Context, who Initiator, req *kmsg.DescribeUserSCRAMCredentialsRequest) (dl *delegation, ok bool) {
	if c.authorize(who, OpDescribe) {
		return nil, true
	}
	if c.Tenants == nil {
		return nil, false
	}
	if dl = c.Tenants.delegationOf(who); dl != nil && !dl.describesUsers(req.Users) {
		if len(dl.admins) > 0 {
			c.Audit.Record(ctx, scramDescribeDenied(who, req))
		}
		dl = nil
	}
	return dl, dl != nil
}

// scramInfos returns each user's credentials (those Tollgate can read),
// sorted by mechanism, and the users in the store's order.
func scramInfos(entries []store.ScramEntry) (map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo, []string) {
	infos := map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
	var all []string
	for _, e := range entries {
		t := scramMechanismType(e.Mechanism)
		if t == 0 {
			continue
		}
		cred, err := auth.ParseScramCredential(e.Mechanism, e.Credential)
		if err != nil {
			continue
		}
		if _, seen := infos[e.User]; !seen {
			all = append(all, e.User)
		}
		ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		ci.Mechanism, ci.Iterations = t, int32(cred.Iterations)
		infos[e.User] = append(infos[e.User], ci)
	}
	for _, u := range all {
		slices.SortFunc(infos[u], func(a, b kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo) int {
			return int(a.Mechanism) - int(b.Mechanism)
		})
	}
	return infos, all
}

// describedUsers returns the users a describe answers, in the order of
// Kafka's HashMap, and those the request names twice: the ones it names,
// or, when it names none, every user with credentials (a tenant's admin,
// dl: its tenant's).
func describedUsers(req *kmsg.DescribeUserSCRAMCredentialsRequest, all []string, dl *delegation) ([]string, map[string]bool) {
	users := newJavaStringMap()
	dup := map[string]bool{}
	if len(req.Users) == 0 {
		for _, u := range all {
			if dl == nil || dl.administers(u) {
				users.put(u)
			}
		}
		return users.keys(), dup
	}
	for _, u := range req.Users {
		if users.has(u.Name) {
			dup[u.Name] = true
		}
		users.put(u.Name)
	}
	return users.keys(), dup
}

// AlterUserScramCredentials: v0
//
// KIP-554: create, replace and delete users' SCRAM credentials. The client
// salts and iterates the password (PBKDF2); the server derives and keeps
// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
// HMAC(SaltedPassword, "Server Key"), never the salted password.
//
// Behavior:
// * ACL: ALTER_CONFIGS on CLUSTER (Authorizer: quota admins); denied: one
// result per distinct user, sorted, each 31 "Cluster authorization failed."
// * KRaft semantics (ScramControlManager.alterCredentials): deletions, then
// upsertions, in request order, keyed by user name alone: a user whose
// earlier entry failed is skipped; a user seen before in the request (any
// mechanism, deletion or upsertion) gets 92 "A user credential cannot be
// altered twice in the same request" and none of its changes apply
// * Checks: empty name 93 "Username must not be empty"; mechanism other
// than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512) 33 "Unknown SCRAM mechanism";
// deleting a credential that does not exist 91 "Attempt to delete a user
// credential that does not exist"; iterations below 4096 93 "Too few
// iterations", above 16384 93 "Too many iterations"; an empty
// SaltedPassword -1 with a null message (Kafka's HMAC refuses an empty key)
// * Atomic: every valid change of the request is committed together
// * Response: successful deletions, then successful upsertions, then
// errors, each group in the order of Kafka's HashMap of user names
// * Audit: one event per user (applied, rejected or denied), recorded and
// synced before the commit; each change names the mechanism and its
// old/new value is "<credential, N iterations>" or null (absent) — never a
// salt or key
//
// Where Tollgate differs from Kafka:
// * Tollgate keeps these credentials itself, for clients authenticating at
// the gateway; the upstream cluster's are untouched
// * Kafka checks ALTER on CLUSTER (Tollgate: ALTER_CONFIGS, the quota
// admins), and its KRaft controller's denial message is "Request <the
// request's toString> is not authorized."; Tollgate answers the
// error's default message, as Kafka's ZooKeeper-mode brokers did
// * An empty Salt is refused with 93 "Salt must not be empty" (Kafka stores
// it; no SCRAM client accepts it)
// * The user name "token" is refused for upsertions with 93: SASL/PLAIN
// user "token" authenticates with an API key
// * Changes are visible at once, to Describe and to logins
// * A required audit sink that cannot take the events refuses every change
// of the request with -1 and commits nothing; a store failure likewise
// answers -1
func (c *Credentials) AlterUserScramCredentials(ctx context.Context, who Initiator, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !c.authorize(who, OpAlterConfigs) {
		deny := apiError{code: errClusterAuthorizationFailed, msg: msgClusterAuthorizationFailed}
		for _, u := range distinctScramUsers(req) {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = u, deny.code, kmsg.StringPtr(deny.msg)
			resp.Results = append(resp.Results, r)
			c.Audit.Record(ctx, c.scramEvent(who, audit.Denied, u, c.requestedScram(req, u), deny))
		}
		return resp
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	sa := c.sortScramAlterations(req)
	changes, okUsers := sa.changes()
	errUsers := sa.toError.keys()
	for _, name := range errUsers {
		c.Audit.Record(ctx, c.scramEvent(who, audit.Rejected, name, c.requestedScram(req, name), sa.errs[name]))
	}

	results := make([]apiError, len(okUsers))
	if len(changes) > 0 {
		results = c.commitScram(ctx, who, changes)
		c.Load()
	}
	for i, name := range okUsers {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = name, results[i].code
		if results[i].failed() {
			r.ErrorMessage = kmsg.StringPtr(results[i].msg)
		}
		resp.Results = append(resp.Results, r)
	}
	for _, name := range errUsers {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = name, sa.errs[name].code
		if sa.errs[name].msg != "" {
			r.ErrorMessage = kmsg.StringPtr(sa.errs[name].msg)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// scramAlterations are a request's changes as Kafka's controller sorts
// them: Kafka's three HashMaps keyed by user name (the users to delete a
// credential of, to upsert one of, and in error) and each one's change or
// error.
type scramAlterations struct {
	toDelete, toUpsert, toError *javaStringMap
	deletions                   map[string]kmsg.AlterUserSCRAMCredentialsRequestDeletion
	upsertions                  map[string]kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	errs                        map[string]apiError
}

func (sa *scramAlterations) fail(user string, e apiError) {
	sa.toError.put(user)
	sa.errs[user] = e
}

// sortScramAlterations checks a request's deletions, then its upsertions,
// in request order: a user in error is skipped, a user seen twice is in
// error and none of its changes apply.
func (c *Credentials) sortScramAlterations(req *kmsg.AlterUserSCRAMCredentialsRequest) *scramAlterations {
	sa := &scramAlterations{
		toDelete: newJavaStringMap(), toUpsert: newJavaStringMap(), toError: newJavaStringMap(),
		deletions:  map[string]kmsg.AlterUserSCRAMCredentialsRequestDeletion{},
		upsertions: map[string]kmsg.AlterUserSCRAMCredentialsRequestUpsertion{},
		errs:       map[string]apiError{},
	}
	for _, d := range req.Deletions {
		if sa.toError.has(d.Name) {
			continue
		}
		if sa.toDelete.remove(d.Name) {
			delete(sa.deletions, d.Name)
			sa.fail(d.Name, apiError{code: errDuplicateResource, msg: msgAlteredTwice})
			continue
		}
		if e := c.validateScramDeletion(d); e.failed() {
			sa.fail(d.Name, e)
			continue
		}
		sa.toDelete.put(d.Name)
		sa.deletions[d.Name] = d
	}
	for _, u := range req.Upsertions {
		if sa.toError.has(u.Name) {
			continue
		}
		if sa.toDelete.remove(u.Name) || sa.toUpsert.remove(u.Name) {
			delete(sa.deletions, u.Name)
			delete(sa.upsertions, u.Name)
			sa.fail(u.Name, apiError{code: errDuplicateResource, msg: msgAlteredTwice})
			continue
		}
		if e := validateScramUpsertion(u); e.failed() {
			sa.fail(u.Name, e)
			continue
		}
		sa.toUpsert.put(u.Name)
		sa.upsertions[u.Name] = u
	}
	return sa
}

// changes returns the store's changes, in Kafka's response order
// (deletions, then the upsertions whose keys could be derived; the others
// are put in error), and the user of each.
func (sa *scramAlterations) changes() ([]store.ScramChange, []string) {
	var changes []store.ScramChange
	var users []string
	for _, name := range sa.toDelete.keys() {
		mech, _ := scramMechanismName(sa.deletions[name].Mechanism)
		changes = append(changes, store.ScramChange{User: name, Mechanism: mech, Delete: true})
		users = append(users, name)
	}
	for _, name := range sa.toUpsert.keys() {
		cred, e := finishScramUpsertion(sa.upsertions[name])
		if e.failed() {
			sa.fail(name, e)
			continue
		}
		changes = append(changes, store.ScramChange{User: name, Mechanism: cred.Mechanism, Credential: cred.Format()})
		users = append(users, name)
	}
	return changes, users
}

// commitScram commits the changes in one store transaction, one change per
// user. The applied events are recorded inside the transaction, before the
// commit; if one cannot be, nothing is committed. It returns each change's
// result.
func (c *Credentials) commitScram(ctx context.Context, who Initiator, changes []store.ScramChange) []apiError {
	var events []audit.Event // recorded so far
	var auditErr error
	hooked := false
	_, err := c.Store.AlterScramFunc(changes, func(rs []store.ScramResult) error {
		hooked = true
		for _, r := range rs {
			ev := c.scramEvent(who, audit.Applied, r.User, []audit.Change{{
				Key: r.Mechanism, Old: credentialValue(r.Mechanism, r.Old, false), New: credentialValue(r.Mechanism, r.New, true),
			}}, apiError{})
			c.Audit.Prepare(&ev)
			// Kept even when Record fails: a required sink before the
			// failing one may hold it, so the follow-up supersedes it.
			events = append(events, ev)
			if auditErr = c.Audit.Record(ctx, ev); auditErr != nil {
				return auditErr
			}
		}
		return nil
	})
	out := make([]apiError, len(changes))
	if err == nil {
		return out
	}
	var res apiError
	outcome := audit.Rejected
	switch {
	case auditErr != nil:
		res = auditRefusal(auditErr)
	case hooked:
		res = apiError{code: errUnknownServerError, msg: "Tollgate could not commit the change: " + err.Error()}
		outcome = audit.Failed
	default:
		res = apiError{code: errUnknownServerError, msg: "Tollgate could not store the change: " + err.Error()}
	}
	for i, ch := range changes {
		out[i] = res
		var follow audit.Event
		if i < len(events) {
			follow = c.scramEvent(who, outcome, ch.User, events[i].Changes, res)
			follow.Supersedes = events[i].ID
		} else {
			follow = c.scramEvent(who, audit.Rejected, ch.User, []audit.Change{c.requestedChange(ch)}, res)
		}
		c.Audit.Record(ctx, follow)
	}
	return out
}

// validateScramDeletion is ScramControlManager.validateDeletion.
func (c *Credentials) validateScramDeletion(d kmsg.AlterUserSCRAMCredentialsRequestDeletion) apiError {
	mech, e := validateScramUserAndMechanism(d.Name, d.Mechanism)
	if e.failed() {
		return e
	}
	_, ok, err := c.Store.ScramCredential(d.Name, mech)
	if err != nil {
		return apiError{code: errUnknownServerError, msg: "Tollgate could not read its store: " + err.Error()}
	}
	if !ok {
		return apiError{code: errResourceNotFound, msg: msgDeleteNotFound}
	}
	return apiError{}
}

// validateScramUpsertion is ScramControlManager.validateUpsertion, then
// Tollgate's own checks.
func validateScramUpsertion(u kmsg.AlterUserSCRAMCredentialsRequestUpsertion) apiError {
	if _, e := validateScramUserAndMechanism(u.Name, u.Mechanism); e.failed() {
		return e
	}
	switch {
	case u.Iterations < auth.MinIterations:
		return apiError{code: errUnacceptableCredential, msg: msgTooFewIterations}
	case u.Iterations > auth.MaxIterations:
		return apiError{code: errUnacceptableCredential, msg: msgTooManyIterations}
	case len(u.Salt) == 0:
		return apiError{code: errUnacceptableCredential, msg: "Salt must not be empty"}
	case u.Name == auth.APIKeyUser:
		return apiError{code: errUnacceptableCredential, msg: "The user name " + auth.APIKeyUser + " is reserved: Tollgate authenticates SASL/PLAIN user " + auth.APIKeyUser + " with an API key"}
	}
	return apiError{}
}

func validateScramUserAndMechanism(user string, mechanism int8) (string, apiError) {
	if user == "" {
		return "", apiError{code: errUnacceptableCredential, msg: msgEmptyUsername}
	}
	mech, ok := scramMechanismName(mechanism)
	if !ok {
		return "", apiError{code: errUnsupportedSaslMechanism, msg: msgUnknownMechanism}
	}
	return mech, apiError{}
}

// finishScramUpsertion derives the stored credential from the salted
// password (ScramControlManager.finishUpsertion). Kafka's HMAC refuses an
// empty key, which it answers as UNKNOWN_SERVER_ERROR without a message.
func finishScramUpsertion(u kmsg.AlterUserSCRAMCredentialsRequestUpsertion) (auth.ScramCredential, apiError) {
	mech, _ := scramMechanismName(u.Mechanism)
	if len(u.SaltedPassword) == 0 {
		return auth.ScramCredential{}, apiError{code: errUnknownServerError}
	}
	h := sha256.New
	if mech == auth.MechanismScramSHA512 {
		h = sha512.New
	}
	clientKey := scramHMAC(h, u.SaltedPassword, "Client Key")
	stored := h()
	stored.Write(clientKey)
	cred := auth.ScramCredential{
		Mechanism:  mech,
		Salt:       slices.Clone(u.Salt),
		Iterations: int(u.Iterations),
		StoredKey:  stored.Sum(nil),
		ServerKey:  scramHMAC(h, u.SaltedPassword, "Server Key"),
	}
	// What is stored must be what the SASL servers can read back.
	if _, err := auth.ParseScramCredential(mech, cred.Format()); err != nil {
		return auth.ScramCredential{}, apiError{code: errUnacceptableCredential, msg: "Tollgate cannot use this credential: " + err.Error()}
	}
	return cred, apiError{}
}

func scramHMAC(h func() hash.Hash, key []byte, data string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// credentialValue describes a stored credential for the audit log without
// any of its secrets: "<credential, 4096 iterations>", or "<new
// credential, …>" for the one an upsertion writes; nil when absent.
func credentialValue(mechanism string, cred *string, isNew bool) *audit.Value {
	if cred == nil {
		return nil
	}
	prefix := "<credential"
	if isNew {
		prefix = "<new credential"
	}
	c, err := auth.ParseScramCredential(mechanism, *cred)
	if err != nil {
		return audit.String(prefix + ">")
	}
	return audit.String(prefix + ", " + strconv.Itoa(c.Iterations) + " iterations>")
}

func newCredentialValue(iterations int32) *audit.Value {
	return audit.String("<new credential, " + strconv.Itoa(int(iterations)) + " iterations>")
}

// requestedScram lists a user's entries in the request as audit changes:
// the mechanism, the credential it has now, and what was asked (a new
// credential, or nil for a deletion).
func (c *Credentials) requestedScram(req *kmsg.AlterUserSCRAMCredentialsRequest, user string) []audit.Change {
	var out []audit.Change
	for _, d := range req.Deletions {
		if d.Name == user {
			out = append(out, audit.Change{Key: scramMechanismLabel(d.Mechanism), Old: c.currentCredential(user, d.Mechanism)})
		}
	}
	for _, u := range req.Upsertions {
		if u.Name == user {
			out = append(out, audit.Change{Key: scramMechanismLabel(u.Mechanism), Old: c.currentCredential(user, u.Mechanism), New: newCredentialValue(u.Iterations)})
		}
	}
	return out
}

// requestedChange is the audit change of a store change not committed.
func (c *Credentials) requestedChange(ch store.ScramChange) audit.Change {
	out := audit.Change{Key: ch.Mechanism, Old: c.currentCredential(ch.User, scramMechanismType(ch.Mechanism))}
	if !ch.Delete {
		out.New = credentialValue(ch.Mechanism, &ch.Credential, true)
	}
	return out
}

func (c *Credentials) currentCredential(user string, mechanism int8) *audit.Value {
	mech, ok := scramMechanismName(mechanism)
	if !ok || user == "" {
		return nil
	}
	cred, ok, err := c.Store.ScramCredential(user, mech)
	if err != nil || !ok {
		return nil
	}
	return credentialValue(mech, &cred, false)
}

// scramEvent builds an alter_user_scram_credentials event for one user.
func (c *Credentials) scramEvent(who Initiator, outcome audit.Outcome, user string, changes []audit.Change, res apiError) audit.Event {
	return audit.Event{
		Action:       audit.ActionAlterUserScramCredentials,
		Outcome:      outcome,
		ErrorCode:    res.code,
		ErrorMessage: res.msg,
		Initiator:    who.audit(),
		Target:       audit.Target{Resource: &audit.Resource{Type: "user", Name: user}},
		Changes:      changes,
	}
}

// distinctScramUsers is the sorted set of users a request names, as
// AlterUserScramCredentialsRequest.getErrorResponse builds it (Java's
// String order: UTF-16 code units).
func distinctScramUsers(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	seen := map[string]bool{}
	var out []string
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	slices.SortFunc(out, javaCompare)
	return out
}

// javaCompare is String.compareTo: UTF-16 code units, invalid UTF-8 as
// U+FFFD per byte.
func javaCompare(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// javaStringMap models the iteration order of a java.util.HashMap<String,
// …> created with new HashMap<>(), with removals (javaMap in javamap.go has
// none): by bucket under the current capacity, then by insertion within a
// bucket. A key put again after its removal goes to the end of its bucket;
// a key put while present keeps its place.
type javaStringMap struct {
	capacity, threshold int
	seq                 int
	at                  map[string]int // key → insertion sequence
}

func newJavaStringMap() *javaStringMap { return &javaStringMap{at: map[string]int{}} }

func (m *javaStringMap) has(k string) bool { _, ok := m.at[k]; return ok }

func (m *javaStringMap) put(k string) {
	if m.has(k) {
		return
	}
	if m.capacity == 0 {
		m.capacity, m.threshold = 16, 12
	}
	m.seq++
	m.at[k] = m.seq
	if len(m.at) > m.threshold {
		m.capacity <<= 1
		m.threshold <<= 1
	}
}

// remove reports whether k was present (HashMap.remove != null).
func (m *javaStringMap) remove(k string) bool {
	if !m.has(k) {
		return false
	}
	delete(m.at, k)
	return true
}

func (m *javaStringMap) keys() []string {
	out := make([]string, 0, len(m.at))
	for k := range m.at {
		out = append(out, k)
	}
	bucket := func(k string) int {
		u := uint32(javaStringHash(k))
		return int((u ^ u>>16) & uint32(m.capacity-1))
	}
	slices.SortFunc(out, func(a, b string) int {
		if d := bucket(a) - bucket(b); d != 0 {
			return d
		}
		return m.at[a] - m.at[b]
	})
	return out
}
