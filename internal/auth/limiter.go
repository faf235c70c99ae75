package auth

import (
	"container/list"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/principal"
)

// ErrTooManyFailedLogins refuses a login from an address that failed too
// often (LoginLimiter). The message says nothing of the user tried: the
// login is refused before the credentials are looked at.
// Errors Allow returns match it (errors.Is) and carry the detail.
var ErrTooManyFailedLogins = &AuthError{Message: "Authentication failed: too many failed logins from this address, try again later", limited: true}

// DefaultLoginLimitAddresses caps the addresses a LoginLimiter tracks when
// LoginLimit.Addresses is 0.
const DefaultLoginLimitAddresses = 65536

// LoginLimit is how many failed logins an address may have (Failures per
// Window, as a token bucket: Failures at once, then one every
// Window/Failures). Failures ≤ 0: no limit.
type LoginLimit struct {
	Failures int
	Window   time.Duration
	// Addresses caps the addresses tracked (0: DefaultLoginLimitAddresses).
	// When it is reached, the address that failed least recently is
	// forgotten: memory stays bounded, and no address is ever refused for
	// another's failures.
	Addresses int
}

// LoginLimiter limits failed logins per source address: IPv4 addresses one
// by one, IPv6 by /64 (what one host or site is given, so that cycling
// through its own addresses gains an attacker nothing). An address that
// used up its failures is refused before its next login looks at any
// credential, until the bucket has refilled. Successful logins do not
// refill it: otherwise one valid account would buy unlimited guesses at
// the others. Time is passed in. A nil *LoginLimiter allows everything.
type LoginLimiter struct {
	lim  LoginLimit
	rate float64 // tokens per second

	mu      sync.Mutex
	byKey   map[netip.Prefix]*list.Element
	lru     list.List // of *loginEntry, most recent failure first
	evicted uint64
}

type loginEntry struct {
	key    netip.Prefix
	tokens float64
	last   time.Time
}

// NewLoginLimiter returns a limiter, or nil (no limit) when l.Failures ≤ 0
// or l.Window ≤ 0.
func NewLoginLimiter(l LoginLimit) *LoginLimiter {
	if l.Failures <= 0 || l.Window <= 0 {
		return nil
	}
	if l.Addresses <= 0 {
		l.Addresses = DefaultLoginLimitAddresses
	}
	return &LoginLimiter{lim: l, rate: float64(l.Failures) / l.Window.Seconds(), byKey: map[netip.Prefix]*list.Element{}}
}

// limitKey is the address's bucket: itself for IPv4, its /64 for IPv6.
func limitKey(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

func (l *LoginLimiter) refill(e *loginEntry, now time.Time) {
	if d := now.Sub(e.last); d > 0 {
		e.tokens = min(float64(l.lim.Failures), e.tokens+d.Seconds()*l.rate)
		e.last = now
	}
}

// Allow reports whether a login from addr may start at now. When it may
// not, err is ErrTooManyFailedLogins wrapped with when the next will be
// allowed (for the log).
func (l *LoginLimiter) Allow(addr netip.Addr, now time.Time) error {
	if l == nil || !addr.IsValid() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.byKey[limitKey(addr)]
	if !ok {
		return nil
	}
	e := el.Value.(*loginEntry)
	l.refill(e, now)
	if e.tokens >= 1 {
		if e.tokens >= float64(l.lim.Failures) { // full again: nothing to remember
			l.lru.Remove(el)
			delete(l.byKey, e.key)
		}
		return nil
	}
	wait := time.Duration((1 - e.tokens) / l.rate * float64(time.Second))
	return &AuthError{Message: ErrTooManyFailedLogins.Message, limited: true,
		Detail: fmt.Sprintf("%d failed logins per %v from %v; the next is allowed in %v", l.lim.Failures, l.lim.Window, e.key, wait.Round(time.Millisecond))}
}

// Failed records a failed login from addr at now.
func (l *LoginLimiter) Failed(addr netip.Addr, now time.Time) {
	if l == nil || !addr.IsValid() {
		return
	}
	k := limitKey(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.byKey[k]
	if !ok {
		if l.lru.Len() >= l.lim.Addresses {
			old := l.lru.Back()
			l.lru.Remove(old)
			delete(l.byKey, old.Value.(*loginEntry).key)
			l.evicted++
		}
		el = l.lru.PushFront(&loginEntry{key: k, tokens: float64(l.lim.Failures), last: now})
		l.byKey[k] = el
	}
	e := el.Value.(*loginEntry)
	l.refill(e, now)
	e.tokens = max(e.tokens-1, 0)
	l.lru.MoveToFront(el)
}

// Tracked returns how many addresses have failures remembered.
func (l *LoginLimiter) Tracked() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

// Evicted returns how many addresses were forgotten because the cap was
// reached.
func (l *LoginLimiter) Evicted() uint64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.evicted
}

// Refused is a Server that refuses the exchange at its first step with
// err (an *AuthError; any other error is refused with Kafka's generic
// message), without looking at any credential: how a login from an
// address over its LoginLimit is answered.
func Refused(mechanism string, err error) Server {
	var ae *AuthError
	if !errors.As(err, &ae) {
		ae = genericFailure(mechanism, err.Error())
	}
	return &refused{mech: mechanism, err: ae}
}

type refused struct {
	mech string
	err  *AuthError
}

func (r *refused) Mechanism() string { return r.mech }

func (r *refused) Step([]byte) ([]byte, bool, error) { return nil, false, r.err }

func (r *refused) Principal() principal.Principal { return principal.Principal{} }
