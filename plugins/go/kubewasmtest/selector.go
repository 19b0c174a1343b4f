package kubewasmtest

import (
	"slices"
	"strings"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// MatchLabels is whether labels match a Kubernetes label selector: equality- and existence-based
// (`a=b`, `a==b`, `a!=b`, `a`, `!a`) and set-based (`a in (x,y)`, `a notin (x,y)`)
// requirements, comma-separated. An empty selector matches everything.
func MatchLabels(labels map[string]string, selector string) (bool, error) {
	if strings.TrimSpace(selector) == "" {
		return true, nil
	}
	// Split on commas outside parentheses.
	var parts []string
	depth, start := 0, 0
	for i, ch := range selector {
		switch ch {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, selector[start:i])
				start = i + 1
			}
		}
	}
	parts = append(parts, selector[start:])
	for _, raw := range parts {
		if strings.TrimSpace(raw) == "" {
			return false, errorf(kubewasm.CodeInvalid, "label selector %q: empty requirement", selector)
		}
	}
	for _, raw := range parts {
		req := strings.TrimSpace(raw)
		var ok bool
		switch {
		case strings.Contains(req, " notin ") || strings.Contains(req, " in "):
			negate := strings.Contains(req, " notin ")
			sep := " in "
			if negate {
				sep = " notin "
			}
			key, values, _ := strings.Cut(req, sep)
			values = strings.TrimSpace(values)
			if !strings.HasPrefix(values, "(") || !strings.HasSuffix(values, ")") {
				return false, errorf(kubewasm.CodeInvalid, "label selector %q: expected (values) after in/notin", selector)
			}
			var allowed []string
			for _, v := range strings.Split(values[1:len(values)-1], ",") {
				allowed = append(allowed, strings.TrimSpace(v))
			}
			present, has := labels[strings.TrimSpace(key)]
			ok = negate
			if has {
				ok = slices.Contains(allowed, present) != negate
			}
		case strings.Contains(req, "!="):
			key, value, _ := strings.Cut(req, "!=")
			ok = labels[strings.TrimSpace(key)] != strings.TrimSpace(value)
		case strings.Contains(req, "="):
			key, value, _ := strings.Cut(strings.Replace(req, "==", "=", 1), "=")
			present, has := labels[strings.TrimSpace(key)]
			ok = has && present == strings.TrimSpace(value)
		case strings.HasPrefix(req, "!"):
			_, has := labels[strings.TrimSpace(req[1:])]
			ok = !has
		default:
			_, ok = labels[req]
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}
