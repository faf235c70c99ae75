package wire

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// padTag is the tag id used to pad a rewritten tag section to its original
// length. Tagged fields a reader does not know are skipped (KIP-482), and
// no Fetch response defines tag 10000.
const padTag = 10000

// RewriteFetchTagsSameLength rewrites the node endpoints (KIP-951) in the
// top-level tag section of a flexible Fetch response without changing its
// length, so that a response already being streamed, whose size prefix has
// been sent, can still be corrected. The rewritten section is padded with
// an unknown tag; if the rewrite does not fit, the endpoints are dropped
// (clients then refresh metadata, the pre-KIP-951 path) and the section is
// all padding. Either way no upstream address reaches the client.
func RewriteFetchTagsSameLength(tags []byte, version int16, m Mapper) ([]byte, error) {
	if len(tags) == 0 || tags[0] == 0 {
		return tags, nil
	}
	// Decode the section with kmsg by putting it behind an empty body:
	// throttle, error, session id and an empty topic array.
	body := make([]byte, 0, 11+len(tags))
	body = append(body, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)
	body = append(body, tags...)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: fetch tag section: %v", ErrMalformed, err)
	}
	rewrite(resp, m)
	enc := resp.AppendTo(nil)[11:]
	if out, ok := padTo(enc, len(tags)); ok {
		return out, nil
	}
	resp.Brokers = nil
	resp.UnknownTags = kmsg.Tags{}
	enc = resp.AppendTo(nil)[11:] // a lone 0x00
	if out, ok := padTo(enc, len(tags)); ok {
		return out, nil
	}
	return nil, fmt.Errorf("%w: cannot pad a %d-byte tag section", ErrMalformed, len(tags))
}

// padTo appends a padding tag to the tag section sec so that it is exactly
// n bytes long.
func padTo(sec []byte, n int) ([]byte, bool) {
	if len(sec) == n {
		return sec, true
	}
	count, off, err := uvarint(sec, 0)
	if err != nil || count >= 127 {
		return nil, false
	}
	rest := sec[off:]
	// New section: count+1 (one byte while < 127), the existing tags,
	// then padTag with a payload of s zero bytes.
	fixed := 1 + len(rest) + kbin.UvarintLen(padTag)
	for s := 0; s < n; s++ {
		if fixed+kbin.UvarintLen(uint32(s))+s == n {
			out := make([]byte, 0, n)
			out = append(out, byte(count+1))
			out = append(out, rest...)
			out = kbin.AppendUvarint(out, padTag)
			out = kbin.AppendUvarint(out, uint32(s))
			out = append(out, make([]byte, s)...)
			return out, true
		}
		if fixed+kbin.UvarintLen(uint32(s))+s > n {
			break
		}
	}
	return nil, false
}
