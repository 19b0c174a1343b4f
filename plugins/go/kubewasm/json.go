package kubewasm

// A JSON reader and writer for Objects (maps, lists, strings, json.Number, bools, nil), used on
// every object that crosses the host boundary. encoding/json does the same job through
// reflection and two scanner passes per document, which compiled to WebAssembly costs several
// times more than the rest of a typical reconcile; this does one pass with plain switches, and
// keeps strings without escapes as slices of the input (no copy). Other values written (structs,
// k8s.io/api types, anything implementing json.Marshaler) go through encoding/json.
//
// It reads what encoding/json reads into an `any` with UseNumber, with the same results: the
// last of duplicate keys wins, invalid UTF-8 in strings becomes U+FFFD. It writes map keys sorted,
// like encoding/json, but without its HTML escaping of <, > and &.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting, as encoding/json does (10 000).
const maxDepth = 10000

type jsonReader struct {
	s     string
	i     int
	depth int
}

func (r *jsonReader) fail(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", r.i, fmt.Sprintf(format, args...))
}

func (r *jsonReader) space() {
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// parseJSON reads one JSON document (and nothing after it but whitespace).
func parseJSON(s string) (any, error) {
	r := jsonReader{s: s}
	r.space()
	v, err := r.value()
	if err != nil {
		return nil, err
	}
	r.space()
	if r.i != len(r.s) {
		return nil, r.fail("unexpected %q after the document", r.s[r.i])
	}
	return v, nil
}

func (r *jsonReader) value() (any, error) {
	if r.i >= len(r.s) {
		return nil, r.fail("unexpected end of input")
	}
	switch c := r.s[r.i]; {
	case c == '{':
		return r.object()
	case c == '[':
		return r.array()
	case c == '"':
		return r.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return r.number()
	case r.literal("true"):
		return true, nil
	case r.literal("false"):
		return false, nil
	case r.literal("null"):
		return nil, nil
	default:
		return nil, r.fail("unexpected %q", c)
	}
}

func (r *jsonReader) literal(word string) bool {
	if len(r.s)-r.i >= len(word) && r.s[r.i:r.i+len(word)] == word {
		r.i += len(word)
		return true
	}
	return false
}

func (r *jsonReader) object() (any, error) {
	if r.depth++; r.depth > maxDepth {
		return nil, r.fail("nested too deeply")
	}
	r.i++ // {
	m := map[string]any{}
	r.space()
	if r.i < len(r.s) && r.s[r.i] == '}' {
		r.i++
		r.depth--
		return m, nil
	}
	for {
		r.space()
		if r.i >= len(r.s) || r.s[r.i] != '"' {
			return nil, r.fail("expected a key")
		}
		key, err := r.str()
		if err != nil {
			return nil, err
		}
		r.space()
		if r.i >= len(r.s) || r.s[r.i] != ':' {
			return nil, r.fail("expected ':'")
		}
		r.i++
		r.space()
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		m[key] = v
		r.space()
		if r.i >= len(r.s) {
			return nil, r.fail("unexpected end of input")
		}
		switch r.s[r.i] {
		case ',':
			r.i++
		case '}':
			r.i++
			r.depth--
			return m, nil
		default:
			return nil, r.fail("expected ',' or '}'")
		}
	}
}

func (r *jsonReader) array() (any, error) {
	if r.depth++; r.depth > maxDepth {
		return nil, r.fail("nested too deeply")
	}
	r.i++ // [
	list := []any{}
	r.space()
	if r.i < len(r.s) && r.s[r.i] == ']' {
		r.i++
		r.depth--
		return list, nil
	}
	for {
		r.space()
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		list = append(list, v)
		r.space()
		if r.i >= len(r.s) {
			return nil, r.fail("unexpected end of input")
		}
		switch r.s[r.i] {
		case ',':
			r.i++
		case ']':
			r.i++
			r.depth--
			return list, nil
		default:
			return nil, r.fail("expected ',' or ']'")
		}
	}
}

// str reads a string; one without escapes or invalid UTF-8 is a slice of the input.
func (r *jsonReader) str() (string, error) {
	r.i++ // "
	start := r.i
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == '"':
			s := r.s[start:r.i]
			r.i++
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf:
			return r.slowStr(start)
		case c < 0x20:
			return "", r.fail("control character in a string")
		default:
			r.i++
		}
	}
	return "", r.fail("unterminated string")
}

// slowStr reads the rest of a string that has escapes or non-ASCII bytes.
func (r *jsonReader) slowStr(start int) (string, error) {
	buf := make([]byte, 0, r.i-start+16)
	buf = append(buf, r.s[start:r.i]...)
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == '"':
			r.i++
			return string(buf), nil
		case c == '\\':
			if r.i+1 >= len(r.s) {
				return "", r.fail("unterminated string")
			}
			e := r.s[r.i+1]
			r.i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				rr, ok := r.hex4()
				if !ok {
					return "", r.fail("bad \\u escape")
				}
				if utf16.IsSurrogate(rr) {
					// A pair: \uD83D\uDE00. A lone surrogate becomes U+FFFD, as in encoding/json.
					save := r.i
					if r.i+1 < len(r.s) && r.s[r.i] == '\\' && r.s[r.i+1] == 'u' {
						r.i += 2
						if low, ok := r.hex4(); ok {
							if dec := utf16.DecodeRune(rr, low); dec != utf8.RuneError {
								buf = utf8.AppendRune(buf, dec)
								continue
							}
						}
					}
					r.i = save
					rr = utf8.RuneError
				}
				buf = utf8.AppendRune(buf, rr)
			default:
				return "", r.fail("bad escape \\%c", e)
			}
		case c < 0x20:
			return "", r.fail("control character in a string")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			r.i++
		default:
			rr, size := utf8.DecodeRuneInString(r.s[r.i:])
			if rr == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, utf8.RuneError)
			} else {
				buf = append(buf, r.s[r.i:r.i+size]...)
			}
			r.i += size
		}
	}
	return "", r.fail("unterminated string")
}

func (r *jsonReader) hex4() (rune, bool) {
	if r.i+4 > len(r.s) {
		return 0, false
	}
	var v rune
	for _, c := range []byte(r.s[r.i : r.i+4]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	r.i += 4
	return v, true
}

// number reads a number in JSON's grammar, as a json.Number (the text itself).
func (r *jsonReader) number() (any, error) {
	start := r.i
	if r.s[r.i] == '-' {
		r.i++
	}
	digits := func() int {
		n := 0
		for r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	if r.i < len(r.s) && r.s[r.i] == '0' {
		r.i++
	} else if digits() == 0 {
		return nil, r.fail("bad number")
	}
	if r.i < len(r.s) && r.s[r.i] == '.' {
		r.i++
		if digits() == 0 {
			return nil, r.fail("bad number")
		}
	}
	if r.i < len(r.s) && (r.s[r.i] == 'e' || r.s[r.i] == 'E') {
		r.i++
		if r.i < len(r.s) && (r.s[r.i] == '+' || r.s[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			return nil, r.fail("bad number")
		}
	}
	return json.Number(r.s[start:r.i]), nil
}

// appendJSON writes v as JSON: maps (keys sorted), lists, strings, numbers, bools and nil
// directly; anything else through encoding/json.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case json.Number:
		if v == "" {
			return append(b, '0'), nil
		}
		if !isNumber(string(v)) {
			return nil, fmt.Errorf("json: invalid number literal %q", string(v))
		}
		return append(b, v...), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case float64:
		return appendFloat(b, v)
	case OwnerReference:
		return appendOwnerReference(b, &v), nil
	case *OwnerReference:
		if v == nil {
			return append(b, "null"...), nil
		}
		return appendOwnerReference(b, v), nil
	case map[string]any:
		return appendMap(b, v)
	case Object:
		return appendMap(b, v)
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, x); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]string:
		if v == nil {
			return append(b, "null"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, v[k])
		}
		return append(b, '}'), nil
	case []string:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		return append(b, ']'), nil
	default:
		text, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return append(b, text...), nil
	}
}

func appendMap(b []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendJSON(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendOwnerReference writes what encoding/json writes for an OwnerReference (its fields in
// declaration order), without reflection: every child a controller makes carries one.
func appendOwnerReference(b []byte, r *OwnerReference) []byte {
	b = append(b, `{"apiVersion":`...)
	b = appendString(b, r.APIVersion)
	b = append(b, `,"kind":`...)
	b = appendString(b, r.Kind)
	b = append(b, `,"name":`...)
	b = appendString(b, r.Name)
	b = append(b, `,"uid":`...)
	b = appendString(b, r.UID)
	if r.Controller != nil {
		b = append(b, `,"controller":`...)
		b = strconv.AppendBool(b, *r.Controller)
	}
	if r.BlockOwnerDeletion != nil {
		b = append(b, `,"blockOwnerDeletion":`...)
		b = strconv.AppendBool(b, *r.BlockOwnerDeletion)
	}
	return append(b, '}')
}

func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %v", f)
	}
	// As encoding/json: 'e' only for very small or large magnitudes, and e-09 written e-9.
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

func isNumber(s string) bool {
	r := jsonReader{s: s}
	_, err := r.number()
	return err == nil && r.i == len(s)
}

const hexDigits = "0123456789abcdef"

// appendString writes s quoted: `"` and `\` and control characters escaped, invalid UTF-8 as
// U+FFFD, and U+2028 and U+2029 escaped (as encoding/json does, for JavaScript).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// marshal is appendJSON into a new buffer.
func marshal(v any) ([]byte, error) {
	return appendJSON(make([]byte, 0, 512), v)
}

var errNotAnObject = errors.New("not a JSON object")
