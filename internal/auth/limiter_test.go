package auth

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The bucket, on an explicit clock: 3 failures at once, then one every
// 20 s (3 per minute); refusals say when, and match ErrTooManyFailedLogins
// and ErrAuthenticationFailed.
func TestLoginLimiterBucket(t *testing.T) {
	l := NewLoginLimiter(LoginLimit{Failures: 3, Window: time.Minute})
	t0 := time.Unix(1_700_000_000, 0)
	a := netip.MustParseAddr("192.0.2.1")
	for i := range 3 {
		if err := l.Allow(a, t0); err != nil {
			t.Fatalf("login %d refused: %v", i, err)
		}
		l.Failed(a, t0)
	}
	err := l.Allow(a, t0)
	if !errors.Is(err, ErrTooManyFailedLogins) || !errors.Is(err, ErrAuthenticationFailed) || ClientMessage(err) != ErrTooManyFailedLogins.Message {
		t.Fatalf("after 3 failures: %v", err)
	}
	if !strings.Contains(err.Error(), "the next is allowed in 20s") {
		t.Errorf("detail: %v", err)
	}
	if err := l.Allow(a, t0.Add(20*time.Second-time.Millisecond)); err == nil {
		t.Fatal("allowed before a token refilled")
	}
	if err := l.Allow(a, t0.Add(20*time.Second)); err != nil {
		t.Fatalf("one token after 20 s: %v", err)
	}
	l.Failed(a, t0.Add(20*time.Second))
	if err := l.Allow(a, t0.Add(30*time.Second)); err == nil {
		t.Fatal("the token was used")
	}
	// A clock going backwards refills nothing.
	if err := l.Allow(a, t0); err == nil {
		t.Fatal("refilled by a backwards clock")
	}
	// A full bucket is forgotten.
	if err := l.Allow(a, t0.Add(time.Hour)); err != nil || l.Tracked() != 0 {
		t.Fatalf("an hour later: %v, %d tracked", err, l.Tracked())
	}
	// Refused logins charge nothing (Allow only reads).
	var nilLimiter *LoginLimiter
	if nilLimiter.Allow(a, t0) != nil || nilLimiter.Tracked() != 0 || NewLoginLimiter(LoginLimit{Failures: -1, Window: time.Minute}) != nil {
		t.Fatal("no limit")
	}
}

// An attacker cannot lock anyone else out: another address is never
// refused for the attacker's failures, an IPv4-mapped IPv6 address is the
// IPv4 address, and an IPv6 attacker cycling through its /64 is one
// address; with the cap reached, the least recently failing address is
// forgotten (never a refusal of a new one), and memory stays bounded.
func TestLoginLimiterAddresses(t *testing.T) {
	l := NewLoginLimiter(LoginLimit{Failures: 2, Window: time.Hour, Addresses: 10})
	t0 := time.Unix(1_700_000_000, 0)
	attacker := netip.MustParseAddr("198.51.100.7")
	l.Failed(attacker, t0)
	l.Failed(netip.MustParseAddr("::ffff:198.51.100.7"), t0)
	if l.Allow(attacker, t0) == nil {
		t.Fatal("the attacker, via its IPv4-mapped address too, is not limited")
	}
	if err := l.Allow(netip.MustParseAddr("198.51.100.8"), t0); err != nil {
		t.Fatalf("a neighbour is refused: %v", err)
	}
	for i := range 5 {
		l.Failed(netip.MustParseAddr(fmt.Sprintf("2001:db8:1:2::%x", i+1)), t0)
	}
	if l.Allow(netip.MustParseAddr("2001:db8:1:2:ffff::1"), t0) == nil {
		t.Fatal("cycling addresses in one /64 escapes the limit")
	}
	if err := l.Allow(netip.MustParseAddr("2001:db8:1:3::1"), t0); err != nil {
		t.Fatalf("the next /64 is refused: %v", err)
	}
	// Many addresses: bounded, the oldest forgotten.
	for i := range 100 {
		l.Failed(netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)}), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if n := l.Tracked(); n != 10 {
		t.Fatalf("%d addresses tracked, cap 10", n)
	}
	if l.Evicted() != 92 {
		t.Fatalf("%d evicted, want 92", l.Evicted())
	}
	if err := l.Allow(netip.MustParseAddr("203.0.113.9"), t0); err != nil {
		t.Fatalf("a new address with the cap reached: %v", err)
	}
}

// Refused: its first step fails with the limiter's error, without a
// credential lookup.
func TestRefusedServer(t *testing.T) {
	srv := Refused(MechanismPlain, ErrTooManyFailedLogins)
	_, done, err := srv.Step([]byte("\x00alice\x00alice-secret"))
	if done || !errors.Is(err, ErrTooManyFailedLogins) || srv.Principal().Name != "" || srv.Mechanism() != MechanismPlain {
		t.Fatalf("%v %v", done, err)
	}
	if _, _, err := Refused(MechanismScramSHA256, errors.New("x")).Step(nil); ClientMessage(err) == "x" || !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("a plain error: %v", err)
	}
}
