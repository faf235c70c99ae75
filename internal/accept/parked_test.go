package accept

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The closer's heap hands parked sockets back earliest deadline first,
// whatever order they were parked in.
func TestParkHeapOrder(t *testing.T) {
	base := time.Now()
	for _, n := range []int{1, 2, 3, 17, 1000} {
		var h parkHeap
		var want []time.Duration
		for i := 0; i < n; i++ {
			d := time.Duration(rand.N(500)) * time.Millisecond // repeats too
			want = append(want, d)
			h.push(parked{at: base.Add(d), c: socket{fd: i}})
		}
		slices.Sort(want)
		for i, w := range want {
			got := h.pop()
			if !got.at.Equal(base.Add(w)) {
				t.Fatalf("n=%d: pop %d is at +%v, want +%v", n, i, got.at.Sub(base), w)
			}
		}
		if len(h) != 0 {
			t.Fatalf("n=%d: %d left after popping all", n, len(h))
		}
	}
}
