package wire

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Mapper turns an upstream broker into the address a client of one
// listener must dial. ok is false when the gateway has no address for the
// broker; the rewriters then leave the broker out rather than leak it.
type Mapper interface {
	Advertise(nodeID int32, host string, port int32) (advHost string, advPort int32, ok bool)
}

// CarriesAddresses reports whether responses of key can name a broker
// address, and so must be rewritten: Produce, Fetch, Metadata and
// ShareFetch by RewriteAddresses, the others by the kafkaapi file of their
// API (FindCoordinator's coordinators, which the gateway answers
// COORDINATOR_NOT_AVAILABLE when it has no port for them; DescribeCluster's
// brokers and ShareAcknowledge's node endpoints, with MapBrokers;
// DescribeQuorum's controller listeners, removed).
func CarriesAddresses(key int16) bool {
	switch key {
	case int16(kmsg.Produce), int16(kmsg.Fetch), int16(kmsg.Metadata), int16(kmsg.FindCoordinator), int16(kmsg.DescribeCluster),
		int16(kmsg.ShareFetch), int16(kmsg.ShareAcknowledge), int16(kmsg.DescribeQuorum):
		return true
	}
	return false
}

// RewriteAddresses replaces every broker address in the Produce, Fetch,
// Metadata or ShareFetch response frame in buf with the address m gives
// for this listener. Produce and Fetch are only walked, and re-encoded only
// in the rare case that they carry node endpoints (KIP-951, sent on leader
// changes); Metadata and ShareFetch are decoded and re-encoded with kmsg at
// their own version.
func RewriteAddresses(buf *Buffer, key, version int16, flexible bool, m Mapper) error {
	p := buf.B[4:]
	bodyOff, err := ResponseBodyOffset(p, key, flexible)
	if err != nil {
		return err
	}
	switch key {
	case int16(kmsg.Produce):
		if version < 9 {
			return nil
		}
		_, tags, err := produceLayout(p, bodyOff, version)
		if err != nil || !hasTags(p, tags) {
			return err
		}
	case int16(kmsg.Fetch):
		if version < 12 {
			return nil
		}
		tags, err := fetchTagsOffset(p, bodyOff, version)
		if err != nil || !hasTags(p, tags) {
			return err
		}
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(p[bodyOff:]); err != nil {
		return fmt.Errorf("%w: %s v%d response: %v", ErrMalformed, kmsg.NameForKey(key), version, err)
	}
	rewrite(resp, m)
	ReplaceBody(buf, bodyOff, resp)
	return nil
}

func rewrite(resp kmsg.Response, m Mapper) {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		r.Brokers = MapBrokers(r.Brokers, m, func(b *kmsg.MetadataResponseBroker) (*int32, *string, *int32) {
			return &b.NodeID, &b.Host, &b.Port
		})
	case *kmsg.ProduceResponse:
		r.Brokers = MapBrokers(r.Brokers, m, func(b *kmsg.ProduceResponseBroker) (*int32, *string, *int32) {
			return &b.NodeID, &b.Host, &b.Port
		})
	case *kmsg.FetchResponse:
		r.Brokers = MapBrokers(r.Brokers, m, func(b *kmsg.FetchResponseBroker) (*int32, *string, *int32) {
			return &b.NodeID, &b.Host, &b.Port
		})
	case *kmsg.ShareFetchResponse:
		r.NodeEndpoints = MapBrokers(r.NodeEndpoints, m, func(b *kmsg.ShareFetchResponseNodeEndpoint) (*int32, *string, *int32) {
			return &b.NodeID, &b.Host, &b.Port
		})
	}
}

// MapBrokers rewrites each broker of a decoded response's broker list to
// the address m gives, leaving out those m has none for; fields points at a
// broker's node id, host and port. Besides RewriteAddresses, the kafkaapi
// files of DescribeCluster and ShareAcknowledge rewrite their answers with
// it.
func MapBrokers[B any](bs []B, m Mapper, fields func(*B) (*int32, *string, *int32)) []B {
	out := bs[:0]
	for i := range bs {
		b := bs[i]
		id, host, port := fields(&b)
		h, p, ok := m.Advertise(*id, *host, *port)
		if !ok {
			continue
		}
		*host, *port = h, p
		out = append(out, b)
	}
	return out
}

// Edit decodes the response frame in buf at its version, lets fn change it,
// and re-encodes it in place of the original.
func Edit(buf *Buffer, key, version int16, flexible bool, fn func(kmsg.Response)) error {
	p := buf.B[4:]
	bodyOff, err := ResponseBodyOffset(p, key, flexible)
	if err != nil {
		return err
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(p[bodyOff:]); err != nil {
		return fmt.Errorf("%w: %s v%d response: %v", ErrMalformed, kmsg.NameForKey(key), version, err)
	}
	fn(resp)
	ReplaceBody(buf, bodyOff, resp)
	return nil
}
