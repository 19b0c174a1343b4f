// Unit tests under plain `go test`: the controller against the SDK's fake host, without a
// cluster or WebAssembly. (The table tests in cases/ run the built component: `make test`.)
package main

import (
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasmtest"
)

func TestAnswersOneSummaryChild(t *testing.T) {
	namespace := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "Namespace",
		"metadata": {"name": "team-a", "uid": "ns-uid", "labels": {"` + Label + `": "true", "team": "blue"}}}`)
	h := kubewasmtest.NewComposite(t, New)
	answer, err := h.Sync(namespace)
	if err != nil {
		t.Fatal(err)
	}
	want := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "team-a-summary", "namespace": "team-a"},
		"data": {"source": "team-a", "keys": "` + Label + `,team", "count": "2"}}`)
	if len(answer.Children) != 1 || !kubewasmtest.Equal(answer.Children[0], want) {
		t.Errorf("children %v", answer.Children)
	}
	if answer.Status != nil {
		t.Errorf("the Namespace's status is left alone: %v", answer.Status)
	}
}

func TestSettings(t *testing.T) {
	h := kubewasmtest.NewComposite(t, New, kubewasmtest.WithSettings(`{"suffix": "index"}`))
	namespace := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "uid": "u"}}`)
	answer, err := h.Sync(namespace)
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
