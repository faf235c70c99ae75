package accept

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// parkedConns closes refused sockets at their deadlines from one goroutine:
// a connection storm parks thousands of sockets a second, and a goroutine
// and timer each would cost more scheduling than the closes themselves.
type parkedConns struct {
	mu    sync.Mutex
	q     parkHeap
	wake  chan struct{} // a new earliest deadline
	count int           // parked now, for tests

	// sink, when set, is the acceptor helper: bare descriptors are handed
	// to it in batches (flush) to be closed at their deadlines there.
	sink    atomic.Pointer[acceptorProc]
	sinkMu  sync.Mutex
	pending []int  // descriptors for the sink
	at      []byte // their deadlines, after the message type byte
}

type parked struct {
	at time.Time
	c  socket
}

// parkHeap is a min-heap by deadline. It is not a container/heap: that
// boxes every entry it pushes and pops, an allocation per refused socket.
type parkHeap []parked

func (h *parkHeap) push(x parked) {
	*h = append(*h, x)
	q := *h
	for i := len(q) - 1; i > 0; {
		up := (i - 1) / 2
		if !q[i].at.Before(q[up].at) {
			break
		}
		q[i], q[up] = q[up], q[i]
		i = up
	}
}

func (h *parkHeap) pop() parked {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = parked{}
	q = q[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && q[l].at.Before(q[m].at) {
			m = l
		}
		if r := l + 1; r < n && q[r].at.Before(q[m].at) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

func newParkedConns() *parkedConns { return &parkedConns{wake: make(chan struct{}, 1)} }

// park closes c at (or just after) at.
func (p *parkedConns) park(c socket, at time.Time) {
	if c.c == nil && p.sink.Load() != nil {
		p.sinkMu.Lock()
		if len(p.at) == 0 {
			p.at = append(p.at, msgClose)
		}
		p.pending = append(p.pending, c.fd)
		p.at = binary.LittleEndian.AppendUint64(p.at, uint64(at.UnixNano()))
		full := len(p.pending) >= closeBatch
		p.sinkMu.Unlock()
		if full {
			p.flush()
		}
		return
	}
	p.parkHere(c, at)
}

// closeSoon closes c now, or has the acceptor helper do it.
func (p *parkedConns) closeSoon(c socket) {
	if c.c == nil && p.sink.Load() != nil {
		p.park(c, time.Now())
		return
	}
	c.Close()
}

// flush hands the sockets parked since the last flush to the acceptor
// helper and closes the gateway's copies (not the connections: the helper
// holds them). If the helper is gone they are parked here instead.
func (p *parkedConns) flush() {
	sink := p.sink.Load()
	if sink == nil {
		return
	}
	p.sinkMu.Lock()
	defer p.sinkMu.Unlock()
	if len(p.pending) == 0 {
		return
	}
	if sink.send(p.at, p.pending) {
		for _, fd := range p.pending {
			closeFD(fd)
		}
	} else {
		p.sink.Store(nil) // from now on, parked here
		for i, fd := range p.pending {
			ns := int64(binary.LittleEndian.Uint64(p.at[1+i*closeRecord:]))
			p.parkHere(socket{fd: fd}, time.Unix(0, ns))
		}
	}
	p.pending, p.at = p.pending[:0], p.at[:0]
}

func (p *parkedConns) parkHere(c socket, at time.Time) {
	p.mu.Lock()
	p.q.push(parked{at: at, c: c})
	p.count++
	first := p.q[0].at.Equal(at)
	p.mu.Unlock()
	if first {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// run closes parked sockets as they fall due, and every one left when
// closing is closed.
func (p *parkedConns) run(closing <-chan struct{}) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var due []socket
	for {
		p.mu.Lock()
		now := time.Now()
		for len(p.q) > 0 && !p.q[0].at.After(now) {
			due = append(due, p.q.pop().c)
		}
		next := time.Hour
		if len(p.q) > 0 {
			next = p.q[0].at.Sub(now)
		}
		p.mu.Unlock()
		for i, c := range due {
			c.Close()
			due[i] = socket{}
		}
		p.mu.Lock()
		p.count -= len(due)
		p.mu.Unlock()
		due = due[:0]
		t.Reset(next)
		select {
		case <-t.C:
		case <-p.wake:
		case <-closing:
			p.mu.Lock()
			q := p.q
			p.q = nil
			p.count = 0
			p.mu.Unlock()
			for _, x := range q {
				x.c.Close()
			}
			return
		}
	}
}

// parkedNow returns how many sockets wait to be closed.
func (p *parkedConns) parkedNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}
