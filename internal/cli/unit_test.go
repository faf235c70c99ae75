package cli

import (
	"maps"
	"math"
	"reflect"
	"testing"
)

// The expected strings are what Java 17 prints (jshell).
func TestJavaDouble(t *testing.T) {
	for v, want := range map[float64]string{
		1024:                "1024.0",
		1.048576e7:          "1.048576E7",
		12.5:                "12.5",
		1e7:                 "1.0E7",
		9999999:             "9999999.0",
		0.001:               "0.001",
		0.0001:              "1.0E-4",
		1e-7:                "1.0E-7",
		123456789.123:       "1.23456789123E8",
		2000:                "2000.0",
		1e21:                "1.0E21",
		0.30000000000000004: "0.30000000000000004",
		0:                   "0.0",
		-5:                  "-5.0",
		math.Inf(1):         "Infinity",
	} {
		if got := javaDouble(v); got != want {
			t.Errorf("javaDouble(%v) = %s, want %s", v, got, want)
		}
	}
}

// The expected orders are what Java 17's HashMap iterates (jshell), for
// maps built as Kafka's DescribeClientQuotasResponse builds them.
func TestJavaHashMapOrder(t *testing.T) {
	keys := func(ks ...string) []string {
		hs := make([]int32, len(ks))
		for i, k := range ks {
			hs[i] = javaStringHash(k)
		}
		var out []string
		for _, i := range javaHashMapOrder(hs) {
			out = append(out, ks[i])
		}
		return out
	}
	for _, c := range []struct{ in, want []string }{
		{[]string{"producer_byte_rate", "consumer_byte_rate"}, []string{"consumer_byte_rate", "producer_byte_rate"}},
		{[]string{"producer_byte_rate", "consumer_byte_rate", "request_percentage"}, []string{"consumer_byte_rate", "producer_byte_rate", "request_percentage"}},
		{[]string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"},
			[]string{"producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate", "request_percentage"}},
	} {
		if got := keys(c.in...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("order of %v = %v, want %v", c.in, got, c.want)
		}
	}
	// Entities: [{user=null}, {user=alice}, {user=bob}] iterate as
	// [{user=alice}, {user=null}, {user=bob}].
	alice, bob := "alice", "bob"
	hs := []int32{
		javaStringHash("user") ^ javaNullableHash(nil),
		javaStringHash("user") ^ javaNullableHash(&alice),
		javaStringHash("user") ^ javaNullableHash(&bob),
	}
	if got := javaHashMapOrder(hs); !reflect.DeepEqual(got, []int{1, 0, 2}) {
		t.Errorf("entity order = %v, want [1 0 2]", got)
	}
}

func TestParseAddConfig(t *testing.T) {
	got, order, err := parseAddConfig("a=1, b = 2,c=[x,y],d=")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "1", "b": "2", "c": "x,y", "d": ""}; !maps.Equal(got, want) {
		t.Errorf("parseAddConfig = %q, want %q", got, want)
	}
	if !reflect.DeepEqual(order, []string{"a", "b", "c", "d"}) {
		t.Errorf("order = %v", order)
	}
	for _, bad := range []string{"a", "a=1,b", "a=1=2"} {
		if _, _, err := parseAddConfig(bad); err == nil {
			t.Errorf("parseAddConfig(%q): no error", bad)
		}
	}
}

func TestParseQuotaValue(t *testing.T) {
	for in, want := range map[string]float64{"1024": 1024, " 2.5 ": 2.5, "1e3": 1000, "10d": 10, "7F": 7} {
		if got, err := parseQuotaValue("k", in); err != nil || got != want {
			t.Errorf("parseQuotaValue(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "fast", "1,5"} {
		if _, err := parseQuotaValue("k", in); err == nil {
			t.Errorf("parseQuotaValue(%q): no error", in)
		}
	}
}
