package model

import "testing"

func pfx(p string) Entity { return ClientPrefixEntity(p) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Adding and removing prefixes keeps the length index right: each length is
// probed once however many prefixes share it, and a removed prefix no longer
// matches.
func TestPrefixSetRemove(t *testing.T) {
	var q Quotas
	for _, p := range []string{"a", "ab", "ac", "abc"} {
		must(t, q.Set(pfx(p), ProducerByteRate, 1))
	}
	tb := q.keys[ProducerByteRate]
	if got := tb.plens; len(got) != 3 || got[0] != 3 || got[1] != 2 || got[2] != 1 {
		t.Fatalf("lengths %v, want [3 2 1]", got)
	}
	q.Remove(pfx("abc"), ProducerByteRate)
	if r := q.Resolve(ProducerByteRate, "u", "abcd"); r.Entity != pfx("ab") {
		t.Errorf("after removing abc: %v", r.Entity)
	}
	q.Remove(pfx("ab"), ProducerByteRate)
	if got := tb.plens; len(got) != 2 || got[0] != 2 {
		t.Errorf("lengths %v after removing ab: ac still has length 2", got)
	}
	c := q.Clone()
	q.Remove(pfx("ac"), ProducerByteRate)
	q.Remove(pfx("a"), ProducerByteRate)
	if r := q.Resolve(ProducerByteRate, "u", "acx"); r.Limited() || q.keys[ProducerByteRate].plens != nil && len(q.keys[ProducerByteRate].plens) != 0 {
		t.Errorf("all removed: %+v, lengths %v", r, q.keys[ProducerByteRate].plens)
	}
	if r := c.Resolve(ProducerByteRate, "u", "acx"); r.Entity != pfx("ac") {
		t.Errorf("the clone lost its prefix: %v", r.Entity)
	}
}
