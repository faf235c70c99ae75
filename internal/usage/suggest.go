package usage

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The quota advisor (tollgate quotas suggest): from the ledger's minutes,
// the byte-rate quota for each user, client-id or tenant that would have
// throttled at most a chosen share of its minutes.

// SuggestQuery is what the advisor reads and how it proposes.
type SuggestQuery struct {
	// Since and Until select the minutes that start in [Since, Until).
	Since, Until time.Time
	// By is ByUser, ByClientID, ByUserClientID or ByTenant.
	By string
	// Percentile (0 < p ≤ 100) of a group's active minutes the proposal
	// covers: its rate in that minute, by the nearest rank.
	Percentile float64
	// Headroom is added above that rate (0.2: 20 %).
	Headroom float64
}

// Validate checks the query.
func (q SuggestQuery) Validate() error {
	switch q.By {
	case ByUser, ByClientID, ByUserClientID, ByTenant:
	default:
		return fmt.Errorf("by %q: want %s, %s, %s or %s", q.By, ByUser, ByClientID, ByUserClientID, ByTenant)
	}
	if !(q.Percentile > 0 && q.Percentile <= 100) {
		return fmt.Errorf("percentile %v: want more than 0 and at most 100", q.Percentile)
	}
	if !(q.Headroom >= 0 && q.Headroom <= 100) {
		return fmt.Errorf("headroom %v: want from 0 (none) to 100 (10 000 %%)", q.Headroom)
	}
	return Query{Since: q.Since, Until: q.Until, By: q.By}.Validate()
}

// Proposal is the advisor's byte-rate quota for one group and one key.
type Proposal struct {
	Tenant, User, ClientID *string // as ReportRow: the fields By groups by
	// Key is producer_byte_rate or consumer_byte_rate.
	Key string
	// Minutes is how many minutes the group moved bytes of Key in.
	Minutes int
	// AtPercentile is its rate in bytes per second at the query's
	// percentile of those minutes, and Peak its busiest minute's.
	AtPercentile, Peak float64
	// Quota is the proposal: AtPercentile plus the headroom, whole bytes
	// per second, at least 1.
	Quota float64
	// ThrottledMinutes is how many of Minutes were above Quota: the
	// minutes it would have throttled.
	ThrottledMinutes int
}

// MinuteSource calls fn with each minute record it holds, in any order;
// one instance's minute may come more than once (a topic that delivered it
// twice), and is counted once.
type MinuteSource func(fn func(*Minute) error) error

// DirMinutes is the minutes of the ledger directories dirs (one per
// instance of a Tollgate cluster, or one).
func DirMinutes(dirs ...string) MinuteSource {
	return func(fn func(*Minute) error) error {
		for _, d := range dirs {
			if err := Minutes(d, time.Time{}, func(m *Minute, _ []byte) error { return fn(m) }); err != nil {
				return err
			}
		}
		return nil
	}
}

// ParseMinute reads one minute line, as the ledger's files and usage.topic
// hold it.
func ParseMinute(line []byte) (Minute, error) { return decodeMinute(line) }

// Suggest proposes, for each group of q.By with traffic in the window, a
// producer_byte_rate and a consumer_byte_rate. The minutes of every
// instance are added up minute by minute, so that a Tollgate cluster's
// ledgers (or its usage.topic) give the cluster-wide rate each quota holds.
// A minute's rate is its bytes ÷ 60: bursts shorter than a minute are not
// seen, which the headroom is for.
func Suggest(src MinuteSource, q SuggestQuery) ([]Proposal, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	since, until := q.Since.UTC(), q.Until.UTC()
	type instMinute struct {
		inst   string
		minute int64
	}
	seen := map[instMinute]bool{}
	per := map[groupKey]map[int64]*Counters{}
	err := src(func(m *Minute) error {
		if m.Minute.Before(since) || !m.Minute.Before(until) {
			return nil
		}
		im := instMinute{m.Instance, unixMinute(m.Minute)}
		if seen[im] {
			return nil
		}
		seen[im] = true
		for _, row := range m.Rows {
			if row.Topic != "" {
				continue // counted in its (user, client-id) row too
			}
			g := groupOf(q.By, row)
			if per[g] == nil {
				per[g] = map[int64]*Counters{}
			}
			c := per[g][im.minute]
			if c == nil {
				c = &Counters{}
				per[g][im.minute] = c
			}
			c.Add(row.Counters)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Proposal
	for g, minutes := range per {
		if g.overflow {
			continue // client ids beyond usage.max_keys: no one client's
		}
		for _, k := range []struct {
			key   string
			bytes func(Counters) int64
		}{
			{"producer_byte_rate", func(c Counters) int64 { return c.ProduceBytes }},
			{"consumer_byte_rate", func(c Counters) int64 { return c.FetchBytes }},
		} {
			var rates []float64
			for _, c := range minutes {
				if b := k.bytes(*c); b > 0 {
					rates = append(rates, float64(b)/60)
				}
			}
			if len(rates) == 0 {
				continue
			}
			row := g.row(q.By, Counters{})
			p := propose(rates, q.Percentile, q.Headroom)
			p.Tenant, p.User, p.ClientID, p.Key = row.Tenant, row.User, row.ClientID, k.key
			out = append(out, p)
		}
	}
	slices.SortFunc(out, compareProposals)
	return out, nil
}

// propose is the proposal for one group's per-minute rates.
func propose(rates []float64, percentile, headroom float64) Proposal {
	slices.Sort(rates)
	rank := max(int(math.Ceil(percentile/100*float64(len(rates)))), 1)
	p := Proposal{Minutes: len(rates), AtPercentile: rates[rank-1], Peak: rates[len(rates)-1]}
	p.Quota = max(math.Ceil(p.AtPercentile*(1+headroom)), 1)
	for _, r := range rates {
		if r > p.Quota {
			p.ThrottledMinutes++
		}
	}
	return p
}

// compareProposals orders proposals by group, then key.
func compareProposals(a, b Proposal) int {
	for _, f := range [][2]*string{{a.Tenant, b.Tenant}, {a.User, b.User}, {a.ClientID, b.ClientID}} {
		if c := compareNames(f[0], f[1]); c != 0 {
			return c
		}
	}
	if a.Key == b.Key {
		return 0
	}
	if a.Key == "producer_byte_rate" {
		return -1
	}
	return 1
}

func compareNames(a, b *string) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	case *a < *b:
		return -1
	case *a > *b:
		return 1
	}
	return 0
}
