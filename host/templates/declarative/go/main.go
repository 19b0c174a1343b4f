// {{name}}: a declarative kubewasm controller plugin.
//
// Every ConfigMap labeled {{name}}.example.com/enabled=true is a parent whose one child is a
// summary ConfigMap, <name>-summary, that lists the keys of its data. Sync answers what the
// children should be; the host creates the summary owned by its parent (so Kubernetes deletes it
// with the parent), applies changes in place, and deletes children no longer answered.
//
// Manifest says what the parents and children are; Sync is the logic.
package main

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// Label makes a ConfigMap a parent.
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
		Child(kinds.ConfigMap, kubewasm.InPlace)
}

func (s *Summarizer) Sync(ctx *kubewasm.Context, req *kubewasm.SyncRequest) (*kubewasm.SyncResponse, error) {
	cm := req.Parent
	var keys []string
	for key := range cm.Map("data") {
		keys = append(keys, key)
	}
	slices.Sort(keys)

	summary := kubewasm.NewObject(kinds.ConfigMap, cm.Namespace(), cm.Name()+"-"+s.suffix)
	summary["data"] = map[string]any{
		"source": cm.Name(),
		"keys":   strings.Join(keys, ","),
		"count":  strconv.Itoa(len(keys)),
	}
	ctx.Info("summarized", "keys", len(keys), "configmap", cm.Name())
	// A ConfigMap has no status: a nil Status leaves it alone.
	return &kubewasm.SyncResponse{Children: []any{summary}}, nil
}

func init() { kubewasm.ExportComposite(New) }

func main() {}
