package cluster

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/store"
)

// The configuration log's side of signing (seal.go): every record it
// produces is signed, every record it reads is checked before it is
// applied, and records whose latest version was not signed with the
// current secret are signed again.

// record makes the record to produce for r: signed, its value sealed when
// it holds a secret, and signed later than the key's latest record (so
// that an instance whose clock is behind another's is not taken for a
// replay).
func (l *Log) record(r store.LogRecord) *kgo.Record {
	rec := &kgo.Record{Key: r.Key, Value: r.Value, Partition: 0}
	k := l.cfg.Keys
	if k == nil {
		return rec
	}
	now := time.Now()
	ts := now.UnixMilli()
	l.mu.Lock()
	if last, ok := l.signedMs[string(r.Key)]; ok && ts <= last {
		ts = last + 1
	}
	l.mu.Unlock()
	secret := l.cfg.Secret != nil && l.cfg.Secret(r.Key)
	rec.Value, rec.Headers = nil, []kgo.RecordHeader{{Key: SigHeader}}
	rec.Value, rec.Headers[0].Value = k.SignRecord(r.Key, r.Value, secret, ts)
	rec.Timestamp = now
	return rec
}

// checkLocked checks one record read from the topic and returns it with
// its plain value; false when it is refused (counted and logged). l.mu is
// held.
func (l *Log) checkLocked(r *kgo.Record) (store.LogRecord, bool) {
	var sig []byte
	for _, h := range r.Headers {
		if h.Key == SigHeader {
			sig = h.Value
			if sig == nil {
				sig = []byte{} // present but empty: malformed, not unsigned
			}
		}
	}
	k := l.cfg.Keys
	if k == nil {
		if sig != nil {
			l.refuseLocked(r, RefusedNoSecret)
			return store.LogRecord{}, false
		}
		return store.LogRecord{Key: r.Key, Value: r.Value}, true
	}
	v, refused := k.VerifyRecord(r.Key, r.Value, sig)
	if refused == "" && v.SignedMs != 0 {
		last, seen := l.signedMs[string(r.Key)]
		skew := v.SignedMs - r.Timestamp.UnixMilli()
		switch {
		case seen && v.SignedMs < last:
			refused = RefusedStale // an older record of the key, copied back in
		case r.Attrs.TimestampType() == 1 && max(skew, -skew) > l.cfg.MaxSkew.Milliseconds():
			refused = RefusedStale // appended long after it was signed
		}
	}
	if refused != "" {
		l.refuseLocked(r, refused)
		return store.LogRecord{}, false
	}
	if v.SignedMs != 0 {
		l.signedMs[string(r.Key)] = v.SignedMs
	}
	if !v.Current && v.Value != nil {
		l.resign[string(r.Key)] = v.Value
	} else {
		delete(l.resign, string(r.Key))
	}
	return store.LogRecord{Key: r.Key, Value: v.Value}, true
}

// refuseLocked counts a refused record and logs it, at most once a
// minute per reason.
func (l *Log) refuseLocked(r *kgo.Record, reason string) {
	l.refused[reason]++
	l.refusedAt[l.refusedN%len(l.refusedAt)] = refusal{offset: r.Offset, reason: reason}
	l.refusedN++
	now := time.Now()
	if now.Sub(l.warned[reason]) < time.Minute {
		return
	}
	l.warned[reason] = now
	l.log.Warn("shared configuration topic: refused a record that fails its signature check; it is not applied (is the topic writable by others than Tollgate?)",
		"topic", l.cfg.Topic, "offset", r.Offset, "reason", reason, "refused_so_far", l.refused[reason])
}

func (l *Log) wakeResign() {
	select {
	case l.resignCh <- struct{}{}:
	default:
	}
}

// resignLoop signs again, with the current secret, the records whose
// latest version was signed with the previous secret or accepted unsigned
// (a rotation or a migration to signing), so that they stay valid once
// the grace ends. Every instance with the new secret may do it; the
// copies it makes are the same key and value, in the topic's order.
func (l *Log) resignLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.resignCh:
		}
		if err := l.resignOnce(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("shared configuration topic: signing records again with the current secret failed; retrying", "topic", l.cfg.Topic, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
			l.wakeResign()
		}
	}
}

func (l *Log) resignOnce(ctx context.Context) error {
	if err := l.CatchUp(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	recs := make([]store.LogRecord, 0, len(l.resign))
	for k, v := range l.resign {
		recs = append(recs, store.LogRecord{Key: []byte(k), Value: v})
	}
	l.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	if err := l.produce(ctx, recs); err != nil {
		return err
	}
	l.log.Info("shared configuration topic: signed records again with the current secret", "topic", l.cfg.Topic, "records", len(recs))
	return nil
}

// refusedIn returns the reason a record in [first, last] was refused, ""
// when none was (as far as the latest refusals tell).
func (l *Log) refusedIn(first, last int64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < min(l.refusedN, len(l.refusedAt)); i++ {
		if r := l.refusedAt[i]; r.offset >= first && r.offset <= last && r.reason != "" {
			return r.reason
		}
	}
	return ""
}
