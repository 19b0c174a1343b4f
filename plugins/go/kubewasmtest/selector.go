package kubewasmtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// The host's label selector parser (host/src/selector.rs), line for line, so that the fake host
// selects exactly what the host would (tests/cases/selectors.yaml holds both to it).

// Requirement is one requirement of a parsed label selector; Op is one of the operators of
// kube's Expression: In, NotIn, Exists, DoesNotExist, Equal, NotEqual.
type Requirement struct {
	Op     string
	Key    string
	Values []string
}

// ParseSelector parses a Kubernetes label selector as the host does; an error of code invalid
// when it does not parse.
func ParseSelector(selector string) ([]Requirement, error) {
	parts, err := splitRequirements(selector)
	if err == nil {
		out := make([]Requirement, 0, len(parts))
		for _, part := range parts {
			var r Requirement
			if r, err = requirement(part); err != nil {
				break
			}
			out = append(out, r)
		}
		if err == nil {
			return out, nil
		}
	}
	return nil, errorf(kubewasm.CodeInvalid, "label selector %q: %v", selector, err)
}

// MatchLabels is whether labels match a Kubernetes label selector: equality- and existence-based
// (`a=b`, `a==b`, `a!=b`, `a`, `!a`) and set-based (`a in (x,y)`, `a notin (x,y)`)
// requirements, comma-separated, as the host matches them. An empty selector matches everything;
// one the host would refuse is an error of code invalid.
func MatchLabels(labels map[string]string, selector string) (bool, error) {
	requirements, err := ParseSelector(selector)
	if err != nil {
		return false, err
	}
	for _, r := range requirements {
		if !r.satisfiedBy(labels) {
			return false, nil
		}
	}
	return true, nil
}

func (r Requirement) satisfiedBy(labels map[string]string) bool {
	value, has := labels[r.Key]
	switch r.Op {
	case "In":
		return has && slices.Contains(r.Values, value)
	case "NotIn":
		return !has || !slices.Contains(r.Values, value)
	case "Exists":
		return has
	case "DoesNotExist":
		return !has
	case "Equal":
		return has && value == r.Values[0]
	default: // NotEqual
		return !has || value != r.Values[0]
	}
}

func splitRequirements(selector string) ([]string, error) {
	var parts []string
	depth, start := 0, 0
	for i, c := range selector {
		switch c {
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return nil, errors.New("unbalanced ')'")
			}
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, selector[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, errors.New("unbalanced '('")
	}
	parts = append(parts, selector[start:])
	if len(parts) == 1 && strings.TrimSpace(parts[0]) == "" {
		return nil, nil
	}
	return parts, nil
}

func requirement(raw string) (Requirement, error) {
	req := strings.TrimSpace(raw)
	if req == "" {
		return Requirement{}, errors.New("empty requirement")
	}
	if key, ok := strings.CutPrefix(req, "!"); ok {
		key, err := labelKey(strings.TrimSpace(key))
		return Requirement{Op: "DoesNotExist", Key: key}, err
	}
	if key, value, ok := strings.Cut(req, "!="); ok {
		return keyValue("NotEqual", key, value)
	}
	if key, value, ok := strings.Cut(req, "=="); ok {
		return keyValue("Equal", key, value)
	}
	if key, value, ok := strings.Cut(req, "="); ok {
		return keyValue("Equal", key, value)
	}
	space := strings.IndexFunc(req, unicode.IsSpace)
	if space < 0 {
		key, err := labelKey(req)
		return Requirement{Op: "Exists", Key: key}, err
	}
	key, err := labelKey(req[:space])
	if err != nil {
		return Requirement{}, err
	}
	rest := strings.TrimSpace(req[space:])
	var op, set string
	if s, ok := strings.CutPrefix(rest, "notin"); ok {
		op, set = "NotIn", s
	} else if s, ok := strings.CutPrefix(rest, "in"); ok {
		op, set = "In", s
	} else {
		return Requirement{}, fmt.Errorf("expected '=', '!=', 'in' or 'notin' after %q", key)
	}
	set = strings.TrimSpace(set)
	if !strings.HasPrefix(set, "(") || !strings.HasSuffix(set, ")") || len(set) < 2 {
		return Requirement{}, fmt.Errorf("the values of %q must be in parentheses", key)
	}
	inner := set[1 : len(set)-1]
	r := Requirement{Op: op, Key: key}
	for _, v := range strings.Split(inner, ",") {
		value, err := labelValue(strings.TrimSpace(v))
		if err != nil {
			return Requirement{}, err
		}
		r.Values = append(r.Values, value)
	}
	return r, nil
}

func keyValue(op, key, value string) (Requirement, error) {
	k, err := labelKey(strings.TrimSpace(key))
	if err != nil {
		return Requirement{}, err
	}
	v, err := labelValue(strings.TrimSpace(value))
	return Requirement{Op: op, Key: k, Values: []string{v}}, err
}

func labelKey(key string) (string, error) {
	name := key
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		prefix := key[:i]
		name = key[i+1:]
		if len(prefix) > 253 || !allOf(strings.Split(prefix, "."), isDNSLabel) {
			return "", fmt.Errorf("label key prefix %q is not a DNS subdomain", prefix)
		}
	}
	if !isLabelName(name) {
		return "", fmt.Errorf("label key %q must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", key)
	}
	return key, nil
}

func labelValue(value string) (string, error) {
	if value != "" && !isLabelName(value) {
		return "", fmt.Errorf("label value %q is not valid", value)
	}
	return value, nil
}

func allOf(parts []string, ok func(string) bool) bool {
	for _, p := range parts {
		if !ok(p) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isLabelName(s string) bool {
	if s == "" || len(s) > 63 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && !strings.ContainsRune("-_.", rune(s[i])) {
			return false
		}
	}
	return true
}

func isDNSLabel(s string) bool {
	ok := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if s == "" || len(s) > 63 || !ok(s[0]) || !ok(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}
