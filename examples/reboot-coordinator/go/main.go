// A node reboot coordinator as a kubewasm plugin, in Go.
//
// A node agent annotates a Node reboot.kubewasm.io/reboot-needed. This controller grants
// reboot.kubewasm.io/reboot-now: "true" to waiting nodes while fewer than maxUnavailable nodes
// (a setting, default 1) are unavailable: rebooting (reboot-now set) or not Ready. The agent
// reboots a granted node and clears both annotations once it is back.
//
// Every Node event re-evaluates every waiting node (MapRelated), so a node coming back Ready
// lets the next one go.
package main

import (
	"fmt"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

const (
	RebootNeeded = "reboot.kubewasm.io/reboot-needed"
	RebootNow    = "reboot.kubewasm.io/reboot-now"
)

// Settings are reboot-coordinator.toml beside reboot-coordinator.wasm.
type Settings struct {
	// MaxUnavailable is how many Nodes may be unavailable at once.
	MaxUnavailable int `json:"maxUnavailable"`
}

// Default is what a missing setting means.
func (s *Settings) Default() { s.MaxUnavailable = 1 }

type RebootCoordinator struct {
	maxUnavailable int
}

func New(s Settings) (*RebootCoordinator, error) {
	if s.MaxUnavailable < 1 {
		return nil, fmt.Errorf("maxUnavailable must be at least 1, got %d", s.MaxUnavailable)
	}
	return &RebootCoordinator{maxUnavailable: s.MaxUnavailable}, nil
}

func waiting(node kubewasm.Object) bool {
	return node.HasAnnotation(RebootNeeded) && !node.HasAnnotation(RebootNow)
}

func unavailable(node kubewasm.Object) bool {
	return node.HasAnnotation(RebootNow) || !node.IsConditionTrue("Ready")
}

func (*RebootCoordinator) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("reboot-coordinator", "0.1.0").
		Primary(kinds.Node).
		Watches(kinds.Node, kubewasm.ByMapRelated()).
		Permission(kinds.Node, kubewasm.VerbPatch).
		MaxConcurrency(1)
}

func (r *RebootCoordinator) Reconcile(ctx *kubewasm.Context, node kubewasm.Object) (kubewasm.Result, error) {
	if !waiting(node) {
		return kubewasm.Result{}, nil
	}
	nodes, err := ctx.List(kinds.Node)
	if err != nil {
		return kubewasm.Result{}, err
	}
	busy := 0
	for _, n := range nodes {
		if unavailable(n) {
			busy++
		}
	}
	if busy < r.maxUnavailable {
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{RebootNow: "true"}}}
		if _, err := ctx.Patch(kinds.Node, "", node.Name(), kubewasm.MergePatch, patch); err != nil {
			return kubewasm.Result{}, err
		}
		ctx.Info("granted reboot", "node", node.Name(), "unavailable", busy, "maxUnavailable", r.maxUnavailable)
	}
	return kubewasm.Result{}, nil
}

// MapRelated: any Node's change re-evaluates the Nodes waiting to reboot, sorted by name.
func (*RebootCoordinator) MapRelated(ctx *kubewasm.Context, _ kubewasm.GVK, _ kubewasm.Object) ([]kubewasm.ObjectKey, error) {
	nodes, err := ctx.List(kinds.Node)
	if err != nil {
		return nil, err
	}
	var waitingNodes []kubewasm.Object
	for _, n := range nodes {
		if waiting(n) {
			waitingNodes = append(waitingNodes, n)
		}
	}
	return kubewasm.SortedKeys(waitingNodes), nil
}

func init() { kubewasm.Export(New) }

func main() {}
