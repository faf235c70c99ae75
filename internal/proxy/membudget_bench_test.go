package proxy

import "testing"

// BenchmarkMemBudget is what socket.queued_max_request_bytes adds to each
// frame: a take and a give, with every goroutine a session of its own.
func BenchmarkMemBudget(b *testing.B) {
	m := newMemBudget(DefaultQueuedMaxRequestBytes)
	done := make(chan struct{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !m.take(16<<10, done, done) {
				b.Fatal("no memory")
			}
			m.give(16 << 10)
		}
	})
}
