package proxy

import (
	"container/heap"
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

type parkHeap []parked

func (h parkHeap) Len() int           { return len(h) }
func (h parkHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h parkHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *parkHeap) Push(x any)        { *h = append(*h, x.(parked)) }
func (h *parkHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = parked{}
	*h = old[:len(old)-1]
	return p
}

func newParkedConns() *parkedConns { return &parkedConns{wake: make(chan struct{}, 1)} }

// park closes c at (or just after) at.
func (p *parkedConns) park(c socket, at time.Time) {
	p.mu.Lock()
	heap.Push(&p.q, parked{at: at, c: c})
	p.count++
	first := p.q[0].c == c
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
			due = append(due, heap.Pop(&p.q).(parked).c)
		}
		next := time.Hour
		if len(p.q) > 0 {
			next = p.q[0].at.Sub(now)
		}
		p.mu.Unlock()
		for i, c := range due {
			c.Close()
			due[i] = nil
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
