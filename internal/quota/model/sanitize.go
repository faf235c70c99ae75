package model

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sanitize encodes a user name the way Kafka's Sanitizer does for the user
// metric tag (and ZooKeeper-era config paths): Java's URLEncoder with UTF-8,
// then "*" → "%2A" and "+" → "%20". Net effect: A–Z a–z 0–9 . - _ stay, every
// other byte of the UTF-8 encoding becomes %XX with upper-case hex.
//
// Names are matched raw everywhere else (KRaft, AlterClientQuotas); this is
// only for Kafka-compatible metric names. Kafka decodes names from the wire
// as UTF-8 with replacement, so an invalid byte here is encoded as U+FFFD;
// only then does Desanitize(Sanitize(s)) differ from s.
func Sanitize(s string) string {
	i := 0
	for i < len(s) && unreserved(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*(len(s)-i) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if unreserved(c) {
			b.WriteByte(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			writeEscaped(&b, "\uFFFD")
			i++
			continue
		}
		writeEscaped(&b, s[i:i+size])
		i += size
	}
	return b.String()
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_'
}

const upperHex = "0123456789ABCDEF"

func writeEscaped(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		b.WriteByte('%')
		b.WriteByte(upperHex[s[i]>>4])
		b.WriteByte(upperHex[s[i]&0xF])
	}
}

// Desanitize reverses Sanitize, with Java URLDecoder semantics: "+" is a
// space, runs of %XX are bytes decoded as UTF-8 (invalid sequences become
// U+FFFD), and a malformed escape is an error.
func Desanitize(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	var run []byte
	flush := func() {
		if len(run) > 0 {
			b.WriteString(strings.ToValidUTF8(string(run), "\uFFFD"))
			run = run[:0]
		}
	}
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '%':
			if i+3 > len(s) {
				return "", fmt.Errorf("quota: incomplete escape at %d in %q", i, s)
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("quota: invalid escape %q in %q", s[i:i+3], s)
			}
			run = append(run, hi<<4|lo)
			i += 3
		case '+':
			flush()
			b.WriteByte(' ')
			i++
		default:
			flush()
			b.WriteByte(c)
			i++
		}
	}
	flush()
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
