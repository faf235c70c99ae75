package clientconf

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
)

// loadProps reads a Java properties file, as Kafka's Utils.loadProps does.
func LoadProps(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseProps(string(b))
}

// parseProps parses the java.util.Properties text format: '#' and '!'
// comments, "key=value", "key: value" or "key value", a backslash at the end
// of a line continuing it, and the escapes \t \n \r \f \uXXXX (any other
// escaped character stands for itself). A later key overrides an earlier one.
func ParseProps(text string) (map[string]string, error) {
	props := map[string]string{}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// Join continuation lines: an odd number of trailing backslashes.
		for trailingBackslashes(line)%2 == 1 {
			line = line[:len(line)-1]
			if i+1 >= len(lines) {
				break
			}
			i++
			line += strings.TrimLeft(lines[i], " \t\f")
		}
		key, value := splitProp(line)
		k, err := unescapeProp(key)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		v, err := unescapeProp(value)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		props[k] = v
	}
	return props, nil
}

func trailingBackslashes(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n
}

// splitProp splits a logical line into its raw (still escaped) key and value.
func splitProp(line string) (string, string) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	key, rest := line[:end], line[end:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

func unescapeProp(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, err := hex4(s, i+1)
			if err != nil {
				return "", err
			}
			i += 4
			if utf16.IsSurrogate(r) && i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if r2, err := hex4(s, i+3); err == nil {
					if c := utf16.DecodeRune(r, r2); c != unicode.ReplacementChar {
						r = c
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

func hex4(s string, at int) (rune, error) {
	if at+4 > len(s) {
		return 0, fmt.Errorf("malformed \\uxxxx encoding")
	}
	n, err := strconv.ParseUint(s[at:at+4], 16, 16)
	if err != nil {
		return 0, fmt.Errorf("malformed \\uxxxx encoding")
	}
	return rune(n), nil
}
