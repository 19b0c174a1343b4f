// The SDK conformance plugin in Go: what each data.do of a primary ConfigMap and each `do`
// annotation of a watched Secret makes it do is in tests/conformance/README.md, the same in
// every language.
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// Settings are conformance.toml (or a case's settings).
type Settings struct {
	Prefix string `json:"prefix"`
}

func (s *Settings) Default() { s.Prefix = "conformance" }

type Conformance struct{ prefix string }

func New(s Settings) (*Conformance, error) { return &Conformance{prefix: s.Prefix}, nil }

var codes = map[string]kubewasm.ErrorCode{
	"not-found": kubewasm.CodeNotFound, "already-exists": kubewasm.CodeAlreadyExists, "conflict": kubewasm.CodeConflict,
	"forbidden": kubewasm.CodeForbidden, "invalid": kubewasm.CodeInvalid, "unavailable": kubewasm.CodeUnavailable, "other": kubewasm.CodeOther,
}

func (*Conformance) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("conformance", "0.1.0").
		Primary(kinds.ConfigMap).
		Watches(kinds.Secret, kubewasm.ByMapRelated()).
		Permission(kinds.ConfigMap, kubewasm.VerbPatch)
}

func (c *Conformance) Reconcile(ctx *kubewasm.Context, cm kubewasm.Object) (kubewasm.Result, error) {
	field := func(key string) string { s, _ := cm.String("data", key); return s }
	var err error
	switch do := field("do"); do {
	case "", "done":
		return kubewasm.Result{}, nil
	case "requeue":
		us, err := strconv.ParseInt(field("after-us"), 10, 64)
		if err != nil {
			return kubewasm.Result{}, err
		}
		// Go's unit of time is time.Duration.
		return kubewasm.Result{RequeueAfter: time.Duration(us) * time.Microsecond}, nil
	case "error":
		code, ok := codes[field("code")]
		if !ok {
			return kubewasm.Result{}, fmt.Errorf("unknown code %q", field("code"))
		}
		return kubewasm.Result{}, kubewasm.NewError(code, "%s: %s", c.prefix, field("code"))
	case "long-error":
		return kubewasm.Result{}, errors.New(strings.Repeat("é", 40_000))
	case "panic":
		panic("conformance panics on purpose")
	case "get-long-name":
		_, err = ctx.Get(kinds.ConfigMap, cm.Namespace(), strings.Repeat("a", 254))
	case "list-long-selector":
		_, err = ctx.List(kinds.ConfigMap, kubewasm.InNamespace(cm.Namespace()), kubewasm.MatchingLabels(strings.Repeat("a", 4097)))
	case "event-long-note":
		err = ctx.Event(cm, kubewasm.Normal, "Checked", "Reconcile", strings.Repeat("n", 1025))
	case "event-empty-reason":
		err = ctx.Event(cm, kubewasm.Normal, "", "Reconcile", "")
	case "read-pod":
		_, err = ctx.Get(kinds.Pod, cm.Namespace(), "x")
	default:
		err = fmt.Errorf("unknown do %q", do)
	}
	return kubewasm.Result{}, err
}

func (*Conformance) MapRelated(_ *kubewasm.Context, _ kubewasm.GVK, secret kubewasm.Object) ([]kubewasm.ObjectKey, error) {
	switch secret.Annotation("do") {
	case "panic":
		panic("conformance panics on purpose in map-related")
	case "error":
		return nil, kubewasm.NewError(kubewasm.CodeInvalid, "conformance fails map-related on purpose")
	}
	if primary := secret.Label("primary"); primary != "" {
		return []kubewasm.ObjectKey{{Namespace: secret.Namespace(), Name: primary}}, nil
	}
	return nil, nil
}

func init() { kubewasm.Export(New) }

func main() {}
