package rate

import "testing"

// Kafka's TokenBucket with Q=10, N=10, W=1 s: a burst of 100.
func TestTokenBucket(t *testing.T) {
	b := NewTokenBucket(10, 10, 1000)
	if got := b.Burst(); got != 100 {
		t.Fatalf("burst = %v, want 100", got)
	}
	steps := []struct {
		at     int64
		record float64
		tokens float64
	}{
		{0, 0, 100},     // starts full
		{0, 90, 10},     // 100 − 90
		{0, 90, -80},    // may go negative
		{1000, 0, -70},  // refills 10/s
		{20000, 0, 100}, // never beyond the burst
		{20000, 250, -150},
		{20500, 0, -145},   // fractional refill
		{20500, -500, 100}, // giving tokens back stops at the burst
	}
	for i, s := range steps {
		b.Record(s.record, t0+s.at)
		if got := b.Balance(); got != s.tokens {
			t.Errorf("step %d: balance %v, want %v", i, got, s.tokens)
		}
		if got := b.Tokens(t0 + s.at); got != s.tokens {
			t.Errorf("step %d: tokens %v, want %v", i, got, s.tokens)
		}
	}
}

// Peek refills a copy: the bucket itself is unchanged, so a later record
// sees the same tokens as if nobody had looked.
func TestTokenBucketPeek(t *testing.T) {
	a, b := NewTokenBucket(10, 10, 1000), NewTokenBucket(10, 10, 1000)
	a.Record(150, t0)
	b.Record(150, t0)
	if got := a.Peek(t0 + 2500); got != -25 {
		t.Fatalf("Peek = %v, want −25", got)
	}
	if a.Balance() != -50 {
		t.Fatalf("Peek changed the balance to %v", a.Balance())
	}
	a.Record(1, t0+3000)
	b.Record(1, t0+3000)
	if a.Balance() != b.Balance() {
		t.Errorf("after Peek: %v, untouched: %v", a.Balance(), b.Balance())
	}
}

// A quota change keeps the tokens; the burst and the refill follow it.
func TestTokenBucketSetQuota(t *testing.T) {
	b := NewTokenBucket(10, 10, 1000)
	b.Record(150, t0) // −50
	b.SetQuota(5)
	if b.Quota() != 5 || b.Burst() != 50 {
		t.Fatalf("quota %v burst %v, want 5 and 50", b.Quota(), b.Burst())
	}
	if got := b.Tokens(t0 + 2000); got != -40 {
		t.Errorf("tokens 2 s later = %v, want −40", got)
	}
	if got := TokenThrottleTime(b.Tokens(t0+2000), b.Quota()); got != 8000 {
		t.Errorf("throttle = %d, want 8000", got)
	}
}
