package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// Report is what one instance publishes every exchange interval: who it is
// (which also says it is alive) and the usage its buckets recorded since
// its previous report. A report too large for one record is split into
// parts that share Seq.
type Report struct {
	Instance string
	// Incarnation tells restarts apart: the process's start, Unix ms.
	Incarnation int64
	Seq         uint64
	Part, Parts uint32
	SentMs      int64
	Leaving     bool // the instance is shutting down cleanly
	Version     string
	// Addr is the instance's admin HTTP address, for operators.
	Addr string
	// Digest fingerprints the quotas of the instance's config file, so
	// that instances whose files differ are visible.
	Digest string
	Usage  []quota.Delta
}

// reportMagic starts every report record; the last byte is the format:
//
//   - 1: each entry is key, user, client-id, value, total;
//   - 2: each entry also has a flags byte after the client-id, and what
//     the flags say follows, in this order: entryTopic, the topic of a
//     per-topic bucket; entryTenant, the tenant of a tenant's bucket.
//
// A part is written in format 1 when none of its entries has a topic or a
// tenant, so that instances that know only format 1 keep reading the
// reports of an upgraded instance until per-topic quotas or tenants are
// configured.
var reportMagic = [4]byte{'T', 'G', 'X', 1}

const (
	format1 = 1
	format2 = 2
	// entryTopic: the entry names a per-topic bucket; its topic follows.
	entryTopic = 1
	// entryTenant: the entry names a tenant's bucket; its tenant follows.
	entryTenant = 2
	// entryFlags is every flag format 2 knows; an entry with another is
	// refused.
	entryFlags = entryTopic | entryTenant
)

const flagLeaving = 1

// maxReportPart bounds one encoded part: comfortably under the default
// max.message.bytes of 1 MiB.
const maxReportPart = 512 << 10

// limits of a decoded report: a record no instance would write is refused
// before anything is allocated for it.
const (
	maxField   = 4096
	maxEntries = maxReportPart / 20
)

var errReport = errors.New("cluster: malformed report")

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendHeader(b []byte, r *Report, part, parts uint32, format byte) []byte {
	b = append(b, reportMagic[:3]...)
	b = append(b, format)
	b = appendString(b, r.Instance)
	b = binary.AppendVarint(b, r.Incarnation)
	b = binary.AppendUvarint(b, r.Seq)
	b = binary.AppendUvarint(b, uint64(part))
	b = binary.AppendUvarint(b, uint64(parts))
	b = binary.AppendVarint(b, r.SentMs)
	var flags byte
	if r.Leaving {
		flags |= flagLeaving
	}
	b = append(b, flags)
	b = appendString(b, r.Version)
	b = appendString(b, r.Addr)
	b = appendString(b, r.Digest)
	return b
}

func appendDelta(b []byte, d quota.Delta, format byte) []byte {
	b = append(b, byte(d.Key))
	b = appendString(b, d.User)
	b = appendString(b, d.Client)
	if format == format2 {
		var flags byte
		if d.Topic != "" {
			flags |= entryTopic
		}
		if d.Tenant != "" {
			flags |= entryTenant
		}
		b = append(b, flags)
		if d.Topic != "" {
			b = appendString(b, d.Topic)
		}
		if d.Tenant != "" {
			b = appendString(b, d.Tenant)
		}
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.Value))
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(d.Total))
}

// Encode returns the report as one or more records (parts), each at most
// maxReportPart bytes unless a single entry is larger.
func (r *Report) Encode() [][]byte {
	// Split the entries first, then write every part with the final count.
	var bounds []int
	size := 0
	for i, d := range r.Usage {
		n := 2 + 4*binary.MaxVarintLen64 + len(d.User) + len(d.Client) + len(d.Topic) + len(d.Tenant) + 16
		if size+n > maxReportPart-1024 && size > 0 {
			bounds = append(bounds, i)
			size = 0
		}
		size += n
	}
	bounds = append(bounds, len(r.Usage))
	out := make([][]byte, 0, len(bounds))
	lo := 0
	for p, hi := range bounds {
		format := byte(format1)
		for _, d := range r.Usage[lo:hi] {
			if d.Topic != "" || d.Tenant != "" {
				format = format2
			}
		}
		b := appendHeader(make([]byte, 0, 256), r, uint32(p), uint32(len(bounds)), format)
		b = binary.AppendUvarint(b, uint64(hi-lo))
		for _, d := range r.Usage[lo:hi] {
			b = appendDelta(b, d, format)
		}
		out = append(out, b)
		lo = hi
	}
	return out
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errReport
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errReport
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errReport
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if n > maxField {
		r.err = errReport
		return ""
	}
	return string(r.bytes(n))
}

// DecodeReport parses one report part. Anything malformed, truncated,
// oversized or of an unknown format is an error.
func DecodeReport(b []byte) (Report, error) {
	var r Report
	if len(b) > maxReportPart+maxField || len(b) < len(reportMagic) || [3]byte(b[:3]) != [3]byte(reportMagic[:3]) ||
		(b[3] != format1 && b[3] != format2) {
		return r, errReport
	}
	format := b[3]
	rd := &reader{b: b[4:]}
	r.Instance = rd.string()
	r.Incarnation = rd.varint()
	r.Seq = rd.uvarint()
	part, parts := rd.uvarint(), rd.uvarint()
	r.SentMs = rd.varint()
	flags := rd.bytes(1)
	r.Version = rd.string()
	r.Addr = rd.string()
	r.Digest = rd.string()
	n := rd.uvarint()
	if rd.err != nil {
		return Report{}, rd.err
	}
	if r.Instance == "" || parts == 0 || part >= parts || parts > 1<<16 || n > maxEntries {
		return Report{}, errReport
	}
	r.Part, r.Parts = uint32(part), uint32(parts)
	r.Leaving = flags[0]&flagLeaving != 0
	if n > 0 {
		r.Usage = make([]quota.Delta, 0, n)
	}
	for range n {
		k := rd.bytes(1)
		user := rd.string()
		client := rd.string()
		var topic, tenant string
		if format == format2 {
			flags := rd.bytes(1)
			if rd.err == nil && flags[0]&^entryFlags != 0 {
				return Report{}, fmt.Errorf("%w: unknown entry flags %#x", errReport, flags[0])
			}
			if rd.err == nil && flags[0]&entryTopic != 0 {
				if topic = rd.string(); rd.err == nil && topic == "" {
					return Report{}, fmt.Errorf("%w: empty topic", errReport)
				}
			}
			if rd.err == nil && flags[0]&entryTenant != 0 {
				if tenant = rd.string(); rd.err == nil && tenant == "" {
					return Report{}, fmt.Errorf("%w: empty tenant", errReport)
				}
			}
		}
		v := rd.bytes(16)
		if rd.err != nil {
			return Report{}, rd.err
		}
		key := model.Key(k[0])
		f := math.Float64frombits(binary.LittleEndian.Uint64(v))
		tot := math.Float64frombits(binary.LittleEndian.Uint64(v[8:]))
		if !key.Valid() || !finite(f) || !finite(tot) {
			return Report{}, fmt.Errorf("%w: bad entry", errReport)
		}
		r.Usage = append(r.Usage, quota.Delta{Key: key, User: user, Client: client, Topic: topic, Tenant: tenant, Value: f, Total: tot})
	}
	if len(rd.b) != 0 {
		return Report{}, fmt.Errorf("%w: %d trailing bytes", errReport, len(rd.b))
	}
	return r, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// peekSender reads who sent a report part without decoding its entries:
// an instance's own reports come back to it, and it needs only to know
// that they did.
func peekSender(b []byte) (instance string, incarnation int64, ok bool) {
	if len(b) < len(reportMagic) || [3]byte(b[:3]) != [3]byte(reportMagic[:3]) || (b[3] != format1 && b[3] != format2) {
		return "", 0, false
	}
	rd := &reader{b: b[4:]}
	instance = rd.string()
	incarnation = rd.varint()
	return instance, incarnation, rd.err == nil && instance != ""
}
