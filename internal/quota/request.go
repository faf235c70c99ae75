package quota

import "time"

// The request quota, request_percentage (KIP-124), at a gateway.
//
// Kafka charges a client the time its requests spend in the broker's
// request-handler threads, as a percentage of one thread per quota window
// (a quota of 200 is two threads' worth): each request records its thread
// time in nanoseconds × 100 / 10⁹ (percent-seconds) into the client's
// sampled rate, and a violation throttles the response by Kafka's formula
// bounded by one window (ClientRequestQuotaManager, RecordRequest). Time a
// request spends parked in a purgatory — a Fetch waiting for data, a
// Produce waiting for its replicas — is not thread time and is not charged.
//
// A gateway sees no threads. What it sees is how long the upstream takes to
// answer each request, and that is what it charges (RequestMeter):
//
//   - A connection's requests are answered in order, one at a time (a
//     Kafka broker reads a connection's next request only once it has
//     answered the previous one), so a request's time starts when it was
//     forwarded or when the answer before it passed, whichever is later,
//     and ends when its own answer passes. Pipelined requests are thus
//     charged once each, never the time they queued behind each other.
//   - A request that lets the broker wait — a Fetch or ShareFetch with
//     max_wait_ms > 0 and min_bytes > 0, a Produce with acks=all for its
//     timeout_ms, a JoinGroup that joins for its rebalance — is charged
//     only its time beyond that wait and a little more (WaitSlack): the
//     gateway cannot tell waiting from working, and charging the wait would
//     throttle every long-polling consumer. A broker answers an expired
//     wait a little after it expires — its purgatory's reaper, then a
//     network thread: not handler-thread time — by a few ms on a quiet
//     machine, tens on a loaded one (a real Kafka 4.4 on two busy cores:
//     10–15 ms past a 1 s max_wait, which throttled a consumer tailing a
//     quiet topic under request_percentage 1).
//   - The first answer on a connection is not charged: its request also
//     waited for the gateway to open its own upstream connection.

// RequestMeter measures the upstream's time for the requests of one
// connection, in the order their answers pass. The zero value is ready; it
// is not safe for concurrent use (a gateway keeps one per connection, on
// the side that reads the answers).
type RequestMeter struct {
	last     time.Time // when the latest answer passed
	answered bool      // an answer has passed
}

// Charge returns the time to charge to request_percentage for a request
// forwarded at fwd whose answer passes at now, which lets the broker wait
// up to wait before answering (0 for none): the upstream's time for it,
// from fwd or the previous answer, whichever is later, to now, less up to
// wait of it. A request that was not forwarded (fwd zero) and the first
// answer on the connection are charged nothing.
func (m *RequestMeter) Charge(fwd, now time.Time, wait time.Duration) time.Duration {
	if fwd.IsZero() {
		return 0
	}
	first, start := !m.answered, fwd
	if m.answered && m.last.After(start) {
		start = m.last
	}
	if !m.answered || now.After(m.last) {
		m.last = now
	}
	m.answered = true
	busy := now.Sub(start)
	if first || busy <= 0 {
		return 0
	}
	return busy - min(busy, max(wait, 0)+WaitSlack(wait))
}

// WaitSlack is how late past a request's wait its answer may pass and
// still count as the wait's: a tenth of the wait, at most 100 ms; none for
// a request that lets the broker wait for nothing. (The wait is the
// client's to choose, and what the broker does within it is not charged
// anyway, so the slack gives a client nothing it could not have by asking
// for a longer wait.)
func WaitSlack(wait time.Duration) time.Duration {
	if wait <= 0 {
		return 0
	}
	return min(wait/10, 100*time.Millisecond)
}
