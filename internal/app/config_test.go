package app

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// yamlKeys lists every key path of a config type, e.g. listeners[].name.
func yamlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() == "time" {
		return nil
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		key := prefix + tag
		out = append(out, key)
		ft := f.Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			out = append(out, yamlKeys(ft.Elem(), key+"[].")...)
			continue
		}
		out = append(out, yamlKeys(ft, key+".")...)
	}
	return out
}

// docs/config.md documents every key the code reads, and nothing else.
func TestConfigReferenceIsComplete(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	code := map[string]bool{}
	for _, k := range yamlKeys(reflect.TypeOf(Config{}), "") {
		code[k] = true
		if !documented[k] {
			t.Errorf("config key %q is not documented in docs/config.md", k)
		}
	}
	for k := range documented {
		if !code[k] {
			t.Errorf("docs/config.md documents %q, which the code does not read", k)
		}
	}
}

func TestParseRejectsUnknownKeysWithLine(t *testing.T) {
	_, err := Parse("t.yaml", strings.NewReader("listeners:\n  - name: A\n    bootstrap: 127.0.0.1:0\nhttp:\n  adress: x\n"))
	if err == nil || !strings.Contains(err.Error(), "t.yaml:5: field adress not found") {
		t.Fatalf("got %v", err)
	}
}

func TestParseValidates(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"listeners: []\n", "at least one listener"},
		{"listeners:\n  - name: A\n    bootstrap: nope\n", `bootstrap "nope"`},
		{"listeners:\n  - bootstrap: 127.0.0.1:1\n", "name is required"},
		{"listeners:\n  - name: A\n    bootstrap: 127.0.0.1:1\nlog:\n  format: xml\n", `log.format "xml"`},
		{"listeners:\n  - name: A\n    bootstrap: 127.0.0.1:1\n    broker_port_base: 70000\n", "broker_port_base 70000"},
		{"listeners:\n  - name: A\n    bootstrap: 127.0.0.1:1\n  - name: A\n    bootstrap: 127.0.0.1:2\n", "defined twice"},
		{"listeners:\n  - name: A\n    bootstrap: 127.0.0.1:1\nquota:\n  byte_rate_algorithm: leaky\n", `quota.byte_rate_algorithm: "leaky" is neither token_bucket nor sampled`},
		{"listeners:\n  - name: A\n    bootstrap: 127.0.0.1:1\nquota:\n  max_buckets: -1\n", "quota.max_buckets: -1, want at least 1"},
		{"listeners:\n  - name: A\n    bootstrap: 127.0.0.1:1\nquota:\n  max_routes: -2\n  metrics_max_buckets: -3\n", "quota.metrics_max_buckets: -3, want at least 1"},
		{"listeners:\n  - name: A\n    bootstrap: 127.0.0.1:1\nsocket:\n  queued_max_request_bytes: 1048576\n", "socket.queued_max_request_bytes 1048576 is smaller than a frame of socket.request_max_bytes (104857600 + 4)"},
	} {
		if _, err := Parse("t.yaml", strings.NewReader(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
