// Unit tests of the reboot coordinator's logic under plain `go test`, against the SDK's fake
// host: no cluster, no WebAssembly.
package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasmtest"
)

// node is a Node with annotations ("needed", "now") and a Ready condition ("" for none).
func node(name string, needed, now bool, ready string) kubewasm.Object {
	n := kubewasm.NewObject(kinds.Node, "", name)
	if needed {
		n.SetAnnotation(RebootNeeded, "true")
	}
	if now {
		n.SetAnnotation(RebootNow, "true")
	}
	if ready != "" {
		n.SetField([]any{map[string]any{"type": "Ready", "status": ready}}, "status", "conditions")
	}
	return n
}

func TestManifest(t *testing.T) {
	m := kubewasmtest.New(t, New).Manifest
	if m.Name != "reboot-coordinator" || m.Primary != kinds.Node || m.MaxConcurrency != 1 {
		t.Errorf("%+v", m)
	}
	if len(m.Watches) != 1 || m.Watches[0].GVK != kinds.Node || m.Watches[0].Mapping != kubewasm.ByMapRelated() {
		t.Errorf("watches %+v", m.Watches)
	}
	if !reflect.DeepEqual(m.Permissions, []kubewasm.Permission{{GVK: kinds.Node, Verbs: []kubewasm.Verb{kubewasm.VerbPatch}}}) {
		t.Errorf("permissions %+v", m.Permissions)
	}
}

func TestSettings(t *testing.T) {
	h := kubewasmtest.New(t, New)
	if got := h.Plugin.Controller().(*RebootCoordinator).maxUnavailable; got != 1 {
		t.Errorf("default maxUnavailable %d", got)
	}
	h = kubewasmtest.New(t, New, kubewasmtest.WithSettings(`{"maxUnavailable": 3}`))
	if got := h.Plugin.Controller().(*RebootCoordinator).maxUnavailable; got != 3 {
		t.Errorf("maxUnavailable %d", got)
	}
	for settings, want := range map[string]string{
		`{"maxUnavailable": 0}`:     "maxUnavailable must be at least 1, got 0",
		`{"maxUnavailable": "two"}`: "cannot unmarshal string",
		`{"maxUnavailable": 1.5}`:   "cannot unmarshal number 1.5",
		`{"maxUnavalable": 2}`:      `unknown field "maxUnavalable"`,
	} {
		if _, err := kubewasmtest.Describe(New, kubewasmtest.WithSettings(settings)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", settings, err, want)
		}
	}
}

func TestGrantsRebootWhenThereIsRoom(t *testing.T) {
	a := node("node-a", true, false, "True")
	h := kubewasmtest.New(t, New, kubewasmtest.WithSettings(`{"maxUnavailable": 2}`),
		kubewasmtest.WithObjects(a, node("node-b", true, true, "True"), node("node-c", false, false, "True")))
	if _, err := h.Reconcile(a); err != nil {
		t.Fatal(err)
	}
	patches := h.Host.Writes("patch")
	if len(h.Host.Calls) != 1 || len(patches) != 1 {
		t.Fatalf("calls %+v", h.Host.Calls)
	}
	p := patches[0]
	want := map[string]any{"metadata": map[string]any{"annotations": map[string]any{RebootNow: "true"}}}
	if p.GVK != kinds.Node || p.Namespace != "" || p.Name != "node-a" || p.PatchType != kubewasm.MergePatch || !kubewasmtest.Equal(p.Body, want) {
		t.Errorf("%+v", p)
	}
	if len(h.Host.Logs) != 1 || h.Host.Logs[0].Fields["node"] != "node-a" || h.Host.Logs[0].Fields["unavailable"] != "1" {
		t.Errorf("logs %+v", h.Host.Logs)
	}
	if stored, _ := h.Host.Object(kinds.Node, "", "node-a"); !stored.HasAnnotation(RebootNow) {
		t.Error("the patch reached the store")
	}
}

func TestWaitsWhenFull(t *testing.T) {
	a := node("node-a", true, false, "True")
	// One rebooting, one not Ready: two unavailable.
	h := kubewasmtest.New(t, New, kubewasmtest.WithSettings(`{"maxUnavailable": 2}`),
		kubewasmtest.WithObjects(a, node("node-b", true, true, "True"), node("node-c", false, false, "False")))
	if _, err := h.Reconcile(a); err != nil || len(h.Host.Calls) != 0 {
		t.Errorf("%v %+v", err, h.Host.Calls)
	}
}

func TestANodeWithoutReadyConditionCountsAsUnavailable(t *testing.T) {
	a := node("node-a", true, false, "True")
	h := kubewasmtest.New(t, New, kubewasmtest.WithObjects(a, node("node-new", false, false, "")))
	if _, err := h.Reconcile(a); err != nil || len(h.Host.Calls) != 0 {
		t.Errorf("%v %+v", err, h.Host.Calls)
	}
}

func TestNothingToDo(t *testing.T) {
	h := kubewasmtest.New(t, New)
	for _, n := range []kubewasm.Object{node("a", true, true, "True"), node("b", false, false, "True")} {
		if _, err := h.Reconcile(n); err != nil || len(h.Host.Calls) != 0 {
			t.Errorf("%s: %v %+v", n.Name(), err, h.Host.Calls)
		}
	}
}

func TestMapRelatedReturnsTheWaitingNodesSortedByName(t *testing.T) {
	h := kubewasmtest.New(t, New, kubewasmtest.WithObjects(node("node-c", true, false, ""), node("node-a", true, false, ""), node("node-b", true, true, "")))
	keys, err := h.MapRelated(kinds.Node, node("node-b", false, false, ""))
	want := []kubewasm.ObjectKey{{Name: "node-a"}, {Name: "node-c"}}
	if err != nil || !reflect.DeepEqual(keys, want) {
		t.Errorf("%v %v", keys, err)
	}
}

func TestListFailuresFailTheReconcile(t *testing.T) {
	a := node("node-a", true, false, "True")
	h := kubewasmtest.New(t, New, kubewasmtest.WithObjects(a))
	h.Host.Fail("cache-list", kubewasm.NewError(kubewasm.CodeUnavailable, "later"), 1)
	if _, err := h.Reconcile(a); kubewasm.CodeOf(err) != kubewasm.CodeUnavailable {
		t.Errorf("%v", err)
	}
}
