package wire_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

func produceRequest(version int16, txnID *string, acks int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.TransactionID = txnID
	req.Acks = acks
	req.TimeoutMillis = 30000
	for ti := 0; ti < 2; ti++ {
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = "orders-" + string(rune('a'+ti))
		topic.TopicID[0], topic.TopicID[15] = byte(ti+1), 0xee
		for pi := int32(0); pi < 3; pi++ {
			p := kmsg.NewProduceRequestTopicPartition()
			p.Partition = pi
			// acks-like byte patterns in the records must not confuse the
			// reader: it never looks past acks.
			p.Records = []byte(strings.Repeat("\x00\x00\xff\xff\x00\x01", 20))
			topic.Partitions = append(topic.Partitions, p)
		}
		req.Topics = append(req.Topics, topic)
	}
	return req
}

func TestProduceAcks(t *testing.T) {
	short := "txn-1"
	long := strings.Repeat("t", 300) // a two-byte compact length
	clientID := "producer-1"
	n := 0
	for v := int16(0); v <= 13; v++ {
		for _, txn := range []*string{nil, &short, &long} {
			for _, acks := range []int16{0, 1, -1} {
				for _, cid := range []*string{nil, &clientID} {
					req := produceRequest(v, txn, acks)
					frame := requestFrame(req, 42, cid)
					p := frame[4:]
					h, err := wire.ParseRequestHeader(p)
					if err != nil {
						t.Fatalf("v%d: %v", v, err)
					}
					got, err := wire.ProduceAcks(p, h)
					if err != nil || got != acks {
						t.Errorf("v%d txn %v acks %d: got %d, %v", v, txn != nil, acks, got, err)
					}
					n++
					if !reqFlexible(int16(kmsg.Produce), v) {
						continue
					}
					// Header tags before the body must be skipped too.
					tagged := withHeaderTags(t, frame, []byte{1, 7, 2, 0, 0})
					h, err = wire.ParseRequestHeader(tagged[4:])
					if err != nil {
						t.Fatal(err)
					}
					if got, err := wire.ProduceAcks(tagged[4:], h); err != nil || got != acks {
						t.Errorf("v%d with header tags, acks %d: got %d, %v", v, acks, got, err)
					}
				}
			}
		}
	}
	if n != 14*3*3*2 {
		t.Fatalf("%d cases", n)
	}
}

func TestProduceAcksTruncated(t *testing.T) {
	txn := "txn-1"
	for v := int16(0); v <= 13; v++ {
		for _, id := range []*string{nil, &txn} {
			frame := requestFrame(produceRequest(v, id, -1), 1, nil)
			p := frame[4:]
			h, err := wire.ParseRequestHeader(p)
			if err != nil {
				t.Fatal(err)
			}
			// Every cut before the end of acks fails cleanly.
			end := h.BodyOffset + 2
			if v >= 3 && id != nil {
				end += len(txn) + 1
				if !reqFlexible(int16(kmsg.Produce), v) {
					end++
				}
			} else if v >= 3 {
				if reqFlexible(int16(kmsg.Produce), v) {
					end++
				} else {
					end += 2
				}
			}
			if got, err := wire.ProduceAcks(p[:end], h); err != nil || got != -1 {
				t.Fatalf("v%d: acks ending at %d: %d, %v", v, end, got, err)
			}
			for cut := h.BodyOffset; cut < end; cut++ {
				if got, err := wire.ProduceAcks(p[:cut], h); err == nil {
					t.Errorf("v%d cut at %d (acks end at %d): acks %d, no error", v, cut, end, got)
				}
			}
		}
	}
	// A classic transactional id length below -1.
	frame := requestFrame(produceRequest(7, nil, 1), 1, nil)
	p := frame[4:]
	h, _ := wire.ParseRequestHeader(p)
	binary.BigEndian.PutUint16(p[h.BodyOffset:], uint16(0xfffe))
	if _, err := wire.ProduceAcks(p, h); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("transactional id length -2: %v, want ErrMalformed", err)
	}
	// A transactional id longer than the frame.
	binary.BigEndian.PutUint16(p[h.BodyOffset:], 0x7fff)
	if _, err := wire.ProduceAcks(p, h); !errors.Is(err, wire.ErrShortFrame) {
		t.Errorf("transactional id past the end: %v, want ErrShortFrame", err)
	}
	frame = requestFrame(produceRequest(11, nil, 1), 1, nil)
	p = frame[4:]
	h, _ = wire.ParseRequestHeader(p)
	for _, bad := range [][]byte{{0xff, 0xff, 0xff, 0xff, 0x0f}, {0xff, 0xff, 0xff, 0xff, 0xff}} {
		q := append(clone(p[:h.BodyOffset]), bad...)
		q = append(q, p[h.BodyOffset+1:]...)
		if _, err := wire.ProduceAcks(q, h); err == nil {
			t.Errorf("compact length % x: no error", bad)
		}
	}
}

// The broker may hold a Produce for its timeout_ms (acks=all waits for
// replication): read in place at every version, transactional id or not.
func TestProduceTimeout(t *testing.T) {
	for v := int16(0); v <= wire.Lookup(int16(kmsg.Produce)).Max; v++ {
		for _, txn := range []*string{nil, kmsg.StringPtr("txn-1")} {
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = v, -1, 12345, txn
			var f kmsg.RequestFormatter
			p := f.AppendRequest(nil, req, 1)[4:]
			h, err := wire.ParseRequestHeader(p)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := wire.ProduceTimeout(p, h); err != nil || got != 12345 {
				t.Fatalf("v%d txn=%v: ProduceTimeout %d, %v", v, txn != nil, got, err)
			}
		}
	}
}
