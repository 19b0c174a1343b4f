// Unit tests under plain `go test`: the controller against the SDK's fake host, without a
// cluster or WebAssembly. (The table tests in cases/ run the built component: `make test`.)
package main

import (
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasmtest"
)

func TestAnswersOneSummaryChild(t *testing.T) {
	cm := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "settings", "namespace": "default", "uid": "cm-uid", "labels": {"` + Label + `": "true"}},
		"data": {"zone": "eu-west-1", "color": "blue"}}`)
	h := kubewasmtest.NewComposite(t, New)
	answer, err := h.Sync(cm)
	if err != nil {
		t.Fatal(err)
	}
	want := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "settings-summary", "namespace": "default"},
		"data": {"source": "settings", "keys": "color,zone", "count": "2"}}`)
	if len(answer.Children) != 1 || !kubewasmtest.Equal(answer.Children[0], want) {
		t.Errorf("children %v", answer.Children)
	}
	if answer.Status != nil {
		t.Errorf("a ConfigMap has no status to write: %v", answer.Status)
	}
}

func TestSettings(t *testing.T) {
	h := kubewasmtest.NewComposite(t, New, kubewasmtest.WithSettings(`{"suffix": "index"}`))
	cm := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default", "uid": "u"}}`)
	answer, err := h.Sync(cm)
	if err != nil {
		t.Fatal(err)
	}
	if name := answer.Children[0].Name(); name != "a-index" {
		t.Errorf("summary named %q", name)
	}
	if _, err := kubewasmtest.DescribeComposite(New, kubewasmtest.WithSettings(`{"suffix": ""}`)); err == nil {
		t.Error("an empty suffix is refused")
	}
}
