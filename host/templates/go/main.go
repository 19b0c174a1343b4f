// {{name}}: a kubewasm controller plugin.
//
// Every ConfigMap labeled {{name}}.example.com/enabled=true gets a summary ConfigMap,
// <name>-summary, that lists the keys of its data and is owned by it (so Kubernetes deletes the
// summary with it). One server-side apply per reconcile; the host does the rest (watches, cache,
// queue, retries).
//
// Manifest says what the plugin reconciles and what it may do; Reconcile is the logic.
package main

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// Label selects the ConfigMaps this controller reconciles.
const Label = "{{name}}.example.com/enabled"

// Settings are {{name}}.toml beside {{name}}.wasm in the host's plugin directory.
type Settings struct {
	// Suffix names a summary <name>-<suffix>.
	Suffix string `json:"suffix"`
}

// Default is what a missing setting means.
func (s *Settings) Default() { s.Suffix = "summary" }

type Summarizer struct {
	suffix string
}

// New builds the controller from its settings; an error refuses to load the plugin.
func New(s Settings) (*Summarizer, error) {
	if s.Suffix == "" {
		return nil, errors.New("suffix must be a non-empty string")
	}
	return &Summarizer{suffix: s.Suffix}, nil
}

func (*Summarizer) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("{{name}}", "0.1.0").
		Primary(kinds.ConfigMap).
		PrimarySelector(Label+"=true").
		Permission(kinds.ConfigMap, kubewasm.VerbCreate, kubewasm.VerbPatch)
}

func (s *Summarizer) Reconcile(ctx *kubewasm.Context, cm kubewasm.Object) (kubewasm.Result, error) {
	var keys []string
	for key := range cm.Map("data") {
		keys = append(keys, key)
	}
	slices.Sort(keys)

	summary := kubewasm.NewObject(kinds.ConfigMap, cm.Namespace(), cm.Name()+"-"+s.suffix)
	summary.SetField([]any{cm.ControllerOwnerRef()}, "metadata", "ownerReferences")
	summary["data"] = map[string]any{
		"source": cm.Name(),
		"keys":   strings.Join(keys, ","),
		"count":  strconv.Itoa(len(keys)),
	}
	if _, err := ctx.Apply(summary); err != nil {
		return kubewasm.Result{}, err
	}
	ctx.Info("summarized", "keys", len(keys), "configmap", cm.Name())
	return kubewasm.Result{}, nil
}

func init() { kubewasm.Export(New) }

func main() {}
