package model

import (
	"strings"
	"testing"
)

func TestParseIPEntity(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "10.0.0.1", want: "10.0.0.1/32"},
		{in: "2001:db8::1", want: "2001:db8::1/128"},
		{in: "::ffff:10.0.0.1", want: "10.0.0.1/32"},
		{in: "10.0.0.0/8", want: "10.0.0.0/8"},
		{in: "2001:db8::/32", want: "2001:db8::/32"},
		{in: "::ffff:10.0.0.0/104", want: "10.0.0.0/8"},
		{in: "0.0.0.0/0", want: "0.0.0.0/0"},
		{in: "10.0.0.1/8", wantErr: "did you mean 10.0.0.0/8"},
		{in: "example.invalid", wantErr: "not a valid IP or CIDR range"},
		{in: "10.0.0.0/33", wantErr: "not a valid IP or CIDR range"},
		{in: "fe80::1%eth0", wantErr: "not a valid IP or CIDR range"},
		{in: "", wantErr: "not a valid IP"},
	}
	for _, tc := range tests {
		got, err := ParseIPEntity(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseIPEntity(%q) error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseIPEntity(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
