package admission

import "testing"

// A zero bound (an ip rate of 0) throttles for exactly the cap: +Inf rounds to
// Long.MAX_VALUE and the quota window bounds it; the connection stays recorded
// until AdmitIP un-records it.
func TestSensorZeroBound(t *testing.T) {
	now := t0ms
	w := window{samples: 11, sizeMs: 1000}
	var s sensor
	s.restart(w)
	if got := s.recordThrottle(w, now); got != 1000 {
		t.Fatalf("throttle %d, want the 1000 ms cap", got)
	}
	if got := s.measure(now); got != 0.1 {
		t.Fatalf("rate %v after the throttled record, want 1 over the 10 s window", got)
	}
	s.unrecord(now)
	if got := s.measure(now); got != 0 {
		t.Fatalf("rate %v after the un-record, want 0", got)
	}
}

// restart reuses the slots when the window keeps its shape and takes the
// new shape when it does not.
func TestSensorRestart(t *testing.T) {
	var s sensor
	s.restart(window{samples: 2, sizeMs: 1000})
	s.recordThrottle(window{samples: 2, sizeMs: 1000}, 5000)
	s.restart(window{samples: 2, sizeMs: 1000})
	if got := s.measure(5000); got != 0 {
		t.Errorf("rate %v after restart, want 0", got)
	}
	s.restart(window{samples: 3, sizeMs: 2000})
	if s.rate.Samples() != 3 || s.rate.SampleMs() != 2000 {
		t.Errorf("shape N=%d W=%d after a window change, want 3 and 2000", s.rate.Samples(), s.rate.SampleMs())
	}
}
