package proxy

import (
	"sync"
	"sync/atomic"
)

// memBudget bounds the bytes of request frames held by every session of
// the gateway together: socket.queued_max_request_bytes, Kafka's
// queued.max.request.bytes (a MemoryPool in Kafka's SocketServer; off
// there by default, on here). A frame's buffer is taken at its declared
// size when its size is read and filled as it arrives, so without a bound
// N connections that each send most of a large frame and stop hold N
// times that much. A session takes its frame's size from the budget before
// the buffer; when the budget is spent it reads nothing (the socket's own
// buffers hold the client back, as Kafka mutes the channel) until memory
// returns.
//
// Unlike Kafka's pool there is no queue: a waiting large frame does not
// hold back smaller ones that fit, so clients with ordinary requests go on
// while frames of the size an attacker sends wait for room.
// DefaultQueuedMaxRequestBytes is socket.queued_max_request_bytes'
// default, 256 MiB: two frames of the largest default size at once, a
// budget that fits a small machine.
const DefaultQueuedMaxRequestBytes = 256 << 20

type memBudget struct {
	total   int64
	free    atomic.Int64
	waiting atomic.Int32 // sessions waiting for memory
	waits   atomic.Uint64

	mu   sync.Mutex
	wake chan struct{} // closed (and replaced) when memory returns
}

func newMemBudget(total int64) *memBudget {
	m := &memBudget{total: total, wake: make(chan struct{})}
	m.free.Store(total)
	return m
}

// tryTake takes n bytes if they are free.
func (m *memBudget) tryTake(n int64) bool {
	for {
		f := m.free.Load()
		if f < n {
			return false
		}
		if m.free.CompareAndSwap(f, f-n) {
			return true
		}
	}
}

// give returns n bytes and wakes the waiting sessions.
func (m *memBudget) give(n int64) {
	m.free.Add(n)
	if m.waiting.Load() == 0 {
		return
	}
	m.mu.Lock()
	close(m.wake)
	m.wake = make(chan struct{})
	m.mu.Unlock()
}

// take takes n bytes, waiting until they are free; false if done or
// stop (the gateway's shutdown: a frame waiting for memory is not worth
// the drain's wait) closed first.
func (m *memBudget) take(n int64, done, stop <-chan struct{}) bool {
	if m.tryTake(n) {
		return true
	}
	m.waits.Add(1)
	m.waiting.Add(1)
	defer m.waiting.Add(-1)
	for {
		m.mu.Lock()
		wake := m.wake
		m.mu.Unlock()
		if m.tryTake(n) { // after reading wake: a give between is not missed
			return true
		}
		select {
		case <-wake:
		case <-done:
			return false
		case <-stop:
			return false
		}
	}
}

// RequestMemory is the request memory budget's state: bytes of request
// frames held now, the budget (0: none), and how many frames have had to
// wait for memory.
func (g *Gateway) RequestMemory() (inUse, budget int64, waits uint64) {
	m := g.mem
	if m == nil {
		return 0, 0, 0
	}
	return m.total - m.free.Load(), m.total, m.waits.Load()
}
