// Unit tests under plain `go test`: the controller against the SDK's fake host, without a
// cluster or WebAssembly. (The table tests in cases/ run the built component: `make test`.)
package main

import (
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasmtest"
)

func TestSummarizesTheDataKeys(t *testing.T) {
	cm := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "settings", "namespace": "default", "uid": "cm-uid", "labels": {"` + Label + `": "true"}},
		"data": {"zone": "eu-west-1", "color": "blue"}}`)
	h := kubewasmtest.New(t, New, kubewasmtest.WithObjects(cm))
	if _, err := h.Reconcile(cm); err != nil {
		t.Fatal(err)
	}
	want := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "settings-summary", "namespace": "default", "ownerReferences": [
			{"apiVersion": "v1", "kind": "ConfigMap", "name": "settings", "uid": "cm-uid", "controller": true, "blockOwnerDeletion": true}]},
		"data": {"source": "settings", "keys": "color,zone", "count": "2"}}`)
	if applied := h.Host.Applied(); len(applied) != 1 || !kubewasmtest.Equal(applied[0], want) {
		t.Errorf("applied %v", applied)
	}
}

func TestSettings(t *testing.T) {
	h := kubewasmtest.New(t, New, kubewasmtest.WithSettings(`{"suffix": "index"}`))
	cm := kubewasm.NewObject(kubewasm.GVK{Version: "v1", Kind: "ConfigMap"}, "default", "a")
	if _, err := h.Reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if name := h.Host.Applied()[0].Name(); name != "a-index" {
		t.Errorf("summary named %q", name)
	}
	if _, err := kubewasmtest.Describe(New, kubewasmtest.WithSettings(`{"suffix": ""}`)); err == nil {
		t.Error("an empty suffix is refused")
	}
}
