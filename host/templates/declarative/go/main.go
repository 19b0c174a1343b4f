// {{name}}: a declarative kubewasm controller plugin.
//
// Every Namespace labeled {{name}}.example.com/enabled=true is a parent whose one child is a
// summary ConfigMap in it, <namespace>-summary, that lists the keys of the namespace's labels.
// Sync answers what the children should be; the host creates the summary owned by its parent,
// applies changes in place, and deletes children no longer answered.
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

// Label makes a Namespace a parent.
const Label = "{{name}}.example.com/enabled"

// Settings are {{name}}.toml beside {{name}}.wasm in the host's plugin directory.
type Settings struct {
	// Suffix names a summary <namespace>-<suffix>.
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
		Primary(kinds.Namespace).
		PrimarySelector(Label+"=true").
		Child(kinds.ConfigMap, kubewasm.InPlace)
}

func (s *Summarizer) Sync(ctx *kubewasm.Context, req *kubewasm.SyncRequest) (*kubewasm.SyncResponse, error) {
	namespace := req.Parent
	var keys []string
	for key := range namespace.Labels() {
		keys = append(keys, key)
	}
	slices.Sort(keys)

	summary := kubewasm.NewObject(kinds.ConfigMap, namespace.Name(), namespace.Name()+"-"+s.suffix)
	summary["data"] = map[string]any{
		"source": namespace.Name(),
		"keys":   strings.Join(keys, ","),
		"count":  strconv.Itoa(len(keys)),
	}
	ctx.Info("summarized", "labels", len(keys), "namespace", namespace.Name())
	// The Namespace's status is the API server's: a nil Status leaves it alone.
	return &kubewasm.SyncResponse{Children: []any{summary}}, nil
}

func init() { kubewasm.ExportComposite(New) }

func main() {}
