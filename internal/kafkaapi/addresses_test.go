package kafkaapi

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
)

// node is a broker address as a response carries it.
type node struct {
	id   int32
	host string
	port int32
}

// upstreamNodes are the brokers an upstream answer names: the connection
// (connAs) has gateway ports for 0 and 1, none for 7.
var upstreamNodes = []node{{0, "10.0.0.1", 9092}, {7, "10.0.0.7", 9092}, {1, "10.0.0.2", 9093}}

// gatewayNodes are upstreamNodes as the client must see them: at the
// listener's host and each broker's gateway port, node 7 left out.
var gatewayNodes = []node{{0, "gw.example", 40000}, {1, "gw.example", 40001}}

func versions(from, to int16) []int16 {
	var vs []int16
	for v := from; v <= to; v++ {
		vs = append(vs, v)
	}
	return vs
}

func maxVersion(key int16) int16 { return kmsg.RequestForKey(key).MaxVersion() }

// Every API whose answers name brokers gets them rewritten to the gateway's
// addresses, broker by broker; a broker the gateway has no port for is left
// out, and the mapper is told every upstream address it saw. The brokers
// are set and read by kmsg's field names (NodeID, Host, Port), which the
// APIs share.
func TestAddressesRewriteBrokerLists(t *testing.T) {
	for _, tc := range []struct {
		key   kmsg.Key
		from  int16  // the first version naming brokers
		field string // the response's list of brokers
	}{
		{kmsg.Metadata, 0, "Brokers"},
		{kmsg.DescribeCluster, 0, "Brokers"},
		{kmsg.Produce, 10, "Brokers"}, // node endpoints: tag 0 from v10 (KIP-951)
		{kmsg.Fetch, 16, "Brokers"},   // node endpoints: tag 0 from v16
		{kmsg.ShareFetch, 0, "NodeEndpoints"},
		{kmsg.ShareAcknowledge, 0, "NodeEndpoints"},
	} {
		for _, v := range versions(tc.from, maxVersion(int16(tc.key))) {
			t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(int16(tc.key)), v), func(t *testing.T) {
				c := connAs(principal.AnonymousPrincipal)
				req := kmsg.RequestForKey(int16(tc.key))
				req.SetVersion(v)
				up := kmsg.ResponseForKey(int16(tc.key))
				brokers := reflect.ValueOf(up).Elem().FieldByName(tc.field)
				for _, n := range upstreamNodes {
					b := reflect.New(brokers.Type().Elem()).Elem()
					b.FieldByName("NodeID").SetInt(int64(n.id))
					b.FieldByName("Host").SetString(n.host)
					b.FieldByName("Port").SetInt(int64(n.port))
					brokers.Set(reflect.Append(brokers, b))
				}
				var got []node
				brokers = reflect.ValueOf(respond(t, addresses{}, c, req, up)).Elem().FieldByName(tc.field)
				for i := range brokers.Len() {
					b := brokers.Index(i)
					got = append(got, node{int32(b.FieldByName("NodeID").Int()), b.FieldByName("Host").String(), int32(b.FieldByName("Port").Int())})
				}
				if fmt.Sprint(got) != fmt.Sprint(gatewayNodes) {
					t.Errorf("client sees brokers %v, want %v", got, gatewayNodes)
				}
				want := map[int32]string{0: "10.0.0.1:9092", 7: "10.0.0.7:9092", 1: "10.0.0.2:9093"}
				if fmt.Sprint(c.Learned) != fmt.Sprint(want) {
					t.Errorf("the mapper learned %v, want %v", c.Learned, want)
				}
			})
		}
	}
}

// FindCoordinator: a coordinator the gateway has a port for gets its
// address; one it has none for becomes COORDINATOR_NOT_AVAILABLE with node
// -1 (retriable) instead of its upstream address; an error, or no node,
// is untouched.
func TestAddressesFindCoordinator(t *testing.T) {
	for v := int16(0); v <= 3; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			for _, tc := range []struct {
				in     node
				inCode int16
				want   node
				code   int16
			}{
				{node{1, "10.0.0.2", 9093}, 0, node{1, "gw.example", 40001}, 0},
				{node{7, "10.0.0.7", 9092}, 0, node{-1, "", -1}, kerr.CoordinatorNotAvailable.Code},
				{node{-1, "", -1}, kerr.NotCoordinator.Code, node{-1, "", -1}, kerr.NotCoordinator.Code},
				{node{-1, "", -1}, 0, node{-1, "", -1}, 0},
			} {
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.Version = v
				up := kmsg.NewPtrFindCoordinatorResponse()
				up.NodeID, up.Host, up.Port, up.ErrorCode = tc.in.id, tc.in.host, tc.in.port, tc.inCode
				got := respond(t, addresses{}, connAs(principal.AnonymousPrincipal), req, up).(*kmsg.FindCoordinatorResponse)
				if n := (node{got.NodeID, got.Host, got.Port}); n != tc.want || got.ErrorCode != tc.code {
					t.Errorf("coordinator %v became %v error %d, want %v error %d", tc.in, n, got.ErrorCode, tc.want, tc.code)
				}
			}
		})
	}
	for v := int16(4); v <= maxVersion(int16(kmsg.FindCoordinator)); v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version = v
			up := kmsg.NewPtrFindCoordinatorResponse()
			up.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{
				{Key: "g1", NodeID: 0, Host: "10.0.0.1", Port: 9092},
				{Key: "g2", NodeID: 7, Host: "10.0.0.7", Port: 9092},
				{Key: "g3", NodeID: -1, Host: "", Port: -1, ErrorCode: kerr.NotCoordinator.Code},
			}
			got := respond(t, addresses{}, connAs(principal.AnonymousPrincipal), req, up).(*kmsg.FindCoordinatorResponse)
			want := []string{
				"g1 {0 gw.example 40000} 0",
				fmt.Sprintf("g2 {-1  -1} %d", kerr.CoordinatorNotAvailable.Code),
				fmt.Sprintf("g3 {-1  -1} %d", kerr.NotCoordinator.Code),
			}
			if len(got.Coordinators) != len(want) {
				t.Fatalf("%d coordinators, want %d (none is left out)", len(got.Coordinators), len(want))
			}
			for i, c := range got.Coordinators {
				if s := fmt.Sprintf("%s %v %d", c.Key, node{c.NodeID, c.Host, c.Port}, c.ErrorCode); s != want[i] {
					t.Errorf("coordinator %d: %s, want %s", i, s, want[i])
				}
			}
		})
	}
}

// DescribeQuorum names controllers, which a client-facing gateway has no
// port for: their listeners are removed, the nodes kept.
func TestAddressesDescribeQuorum(t *testing.T) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	up := kmsg.NewPtrDescribeQuorumResponse()
	up.Nodes = []kmsg.DescribeQuorumResponseNode{
		{NodeID: 3000, Listeners: []kmsg.DescribeQuorumResponseNodeListener{{Name: "CONTROLLER", Host: "10.0.0.30", Port: 9093}}},
		{NodeID: 3001, Listeners: []kmsg.DescribeQuorumResponseNodeListener{{Name: "CONTROLLER", Host: "10.0.0.31", Port: 9093}}},
	}
	got := respond(t, addresses{}, connAs(principal.AnonymousPrincipal), req, up).(*kmsg.DescribeQuorumResponse)
	if len(got.Nodes) != 2 {
		t.Fatalf("%d nodes, want 2", len(got.Nodes))
	}
	for _, n := range got.Nodes {
		if len(n.Listeners) != 0 {
			t.Errorf("node %d still lists %v", n.NodeID, n.Listeners)
		}
	}
}

// Produce and Fetch answers without node endpoints (all but those after a
// leader change) are walked, not re-encoded: the frame passes as it came.
func TestAddressesProduceFetchUntouched(t *testing.T) {
	for _, tc := range []struct {
		key  int16
		resp func() kmsg.Response
	}{
		{int16(kmsg.Produce), func() kmsg.Response {
			r := kmsg.NewPtrProduceResponse()
			tp := kmsg.NewProduceResponseTopic()
			tp.Topic = "t"
			tp.Partitions = []kmsg.ProduceResponseTopicPartition{{Partition: 0, BaseOffset: 42}}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{int16(kmsg.Fetch), func() kmsg.Response {
			r := kmsg.NewPtrFetchResponse()
			tp := kmsg.NewFetchResponseTopic()
			tp.Topic = "t"
			tp.Partitions = []kmsg.FetchResponseTopicPartition{{Partition: 0, HighWatermark: 42, RecordBatches: []byte("records")}}
			r.Topics = append(r.Topics, tp)
			return r
		}},
	} {
		for v := int16(0); v <= maxVersion(tc.key); v++ {
			req := kmsg.RequestForKey(tc.key)
			req.SetVersion(v)
			r, err := proxytest.Request(req, 5)
			if err != nil {
				t.Fatal(err)
			}
			pr := proxytest.Response(r, tc.resp())
			before := bytes.Clone(pr.Buf.B)
			c := connAs(principal.AnonymousPrincipal)
			if err := (addresses{}).OnResponse(c, pr); err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(tc.key), v, err)
			}
			if !bytes.Equal(before, pr.Buf.B) || len(c.Learned) != 0 {
				t.Errorf("%s v%d without node endpoints was changed", kmsg.NameForKey(tc.key), v)
			}
		}
	}
}
