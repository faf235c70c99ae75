package proxy

import (
	"sync"
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
