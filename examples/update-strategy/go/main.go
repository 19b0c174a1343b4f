// Metacontroller's update-strategy example as a kubewasm declarative plugin, in Go.
//
// Each parent (an OnDeleteDemo or a RecreateDemo, ctl.example.com/v1) has one ConfigMap child,
// <parent name>-data, whose data.value is the parent's spec.configData ("initial" when unset),
// and a status {observedConfigData: <the same>}. The host creates, updates and deletes the
// ConfigMap from that answer; what it does when spec.configData changes is the child's update
// strategy: an OnDeleteDemo's ConfigMap is left as it is until someone deletes it (on-delete),
// a RecreateDemo's is deleted and made again (recreate).
//
// One module, installed twice: its `kind` setting (NAME.toml beside the .wasm) picks the parent
// kind, the child's update strategy and the plugin's name.
package main

import (
	"fmt"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// The parent kinds.
var (
	OnDeleteDemo = kubewasm.GVK{Group: "ctl.example.com", Version: "v1", Kind: "OnDeleteDemo"}
	RecreateDemo = kubewasm.GVK{Group: "ctl.example.com", Version: "v1", Kind: "RecreateDemo"}
)

// DefaultConfigData is a parent's configData when its spec has none (the CRD's default too).
const DefaultConfigData = "initial"

// Settings are the plugin's settings.
type Settings struct {
	// Kind is the parent kind this installation serves: OnDeleteDemo or RecreateDemo.
	Kind string `json:"kind"`
}

// demo is what one installation of the plugin serves.
type demo struct {
	name     string // the plugin's name
	parent   kubewasm.GVK
	strategy kubewasm.UpdateStrategy // the ConfigMap child's
}

var demos = map[string]demo{
	OnDeleteDemo.Kind: {name: "on-delete-demo", parent: OnDeleteDemo, strategy: kubewasm.OnDelete},
	RecreateDemo.Kind: {name: "recreate-demo", parent: RecreateDemo, strategy: kubewasm.Recreate},
}

// UpdateStrategyDemo is the declarative controller of one parent kind.
type UpdateStrategyDemo struct{ demo }

// New refuses settings without a known kind: the plugin is installed once per kind, each time
// with its own settings.
func New(s Settings) (*UpdateStrategyDemo, error) {
	if s.Kind == "" {
		return nil, fmt.Errorf("settings: kind is not set: set kind = %q or kind = %q in the plugin's settings (NAME.toml)", OnDeleteDemo.Kind, RecreateDemo.Kind)
	}
	d, ok := demos[s.Kind]
	if !ok {
		return nil, fmt.Errorf("settings: kind %q is neither %q nor %q", s.Kind, OnDeleteDemo.Kind, RecreateDemo.Kind)
	}
	return &UpdateStrategyDemo{d}, nil
}

func (c *UpdateStrategyDemo) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest(c.name, "0.1.0").
		Primary(c.parent).
		Child(kinds.ConfigMap, c.strategy)
}

// Sync answers the parent's ConfigMap and status (the original's sync hook).
func (c *UpdateStrategyDemo) Sync(_ *kubewasm.Context, req *kubewasm.SyncRequest) (*kubewasm.SyncResponse, error) {
	cfg, _ := req.Parent.String("spec", "configData")
	if cfg == "" {
		cfg = DefaultConfigData
	}
	cm := kubewasm.NewObject(kinds.ConfigMap, "", req.Parent.Name()+"-data") // in the parent's namespace
	cm["data"] = map[string]any{"value": cfg}
	return &kubewasm.SyncResponse{
		Status:   map[string]any{"observedConfigData": cfg},
		Children: []any{cm},
	}, nil
}

func init() { kubewasm.ExportComposite(New) }

func main() {}
