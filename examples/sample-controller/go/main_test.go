// Unit tests of the sample-controller's logic under plain `go test`, against the SDK's fake
// host: no cluster, no WebAssembly.
package main

import (
	"reflect"
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasmtest"
)

func foo(spec string) kubewasm.Object {
	return kubewasmtest.Parse(`{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
		"metadata": {"name": "example-foo", "namespace": "default", "uid": "foo-uid", "generation": 3},
		"spec": ` + spec + `}`)
}

func expectedDeployment(replicas string) kubewasm.Object {
	return kubewasmtest.Parse(`{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": {"name": "web", "namespace": "default", "ownerReferences": [{"apiVersion": "samplecontroller.k8s.io/v1alpha1",
			"kind": "Foo", "name": "example-foo", "uid": "foo-uid", "controller": true, "blockOwnerDeletion": true}]},
		"spec": {"replicas": ` + replicas + `, "selector": {"matchLabels": {"app": "nginx", "controller": "example-foo"}},
			"template": {"metadata": {"labels": {"app": "nginx", "controller": "example-foo"}},
				"spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}}`)
}

func expectedStatus(available string) kubewasm.Object {
	return kubewasmtest.Parse(`{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
		"metadata": {"name": "example-foo", "namespace": "default"},
		"status": {"availableReplicas": ` + available + `, "observedGeneration": 3}}`)
}

// same compares objects as JSON documents (numbers by value).
func same(t *testing.T, what string, got, want []kubewasm.Object) {
	t.Helper()
	if !kubewasmtest.Equal(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func TestManifest(t *testing.T) {
	m := kubewasmtest.New(t, New).Manifest
	if m.Name != "sample-controller" || m.Version != "0.1.0" || m.Primary != Foo || m.MaxConcurrency != 2 {
		t.Errorf("%+v", m)
	}
	if !reflect.DeepEqual(m.Owns, []kubewasm.GVK{kinds.Deployment}) || len(m.Watches) != 0 || m.Finalizer != "" {
		t.Errorf("%+v", m)
	}
	want := []kubewasm.Permission{
		{GVK: kinds.Deployment, Verbs: []kubewasm.Verb{kubewasm.VerbCreate, kubewasm.VerbPatch}},
		{GVK: Foo, Subresource: "status", Verbs: []kubewasm.Verb{kubewasm.VerbPatch}},
	}
	if !reflect.DeepEqual(m.Permissions, want) {
		t.Errorf("permissions %+v", m.Permissions)
	}
}

func TestCreatesDeploymentAndStatus(t *testing.T) {
	f := foo(`{"deploymentName": "web", "replicas": 2}`)
	h := kubewasmtest.New(t, New, kubewasmtest.WithObjects(f))
	if result, err := h.Reconcile(f); err != nil || result != (kubewasm.Result{}) {
		t.Fatalf("%v %v", result, err)
	}
	same(t, "applied", h.Host.Applied(), []kubewasm.Object{expectedDeployment("2")})
	same(t, "status", h.Host.StatusApplied(), []kubewasm.Object{expectedStatus("0")})
	for _, c := range h.Host.Calls {
		if !c.Force {
			t.Errorf("%s without force", c.Op)
		}
	}
	if len(h.Host.Events) != 0 {
		t.Errorf("events %v", h.Host.Events)
	}
}

func TestReplicasDefaultToOneAndZeroIsKept(t *testing.T) {
	h := kubewasmtest.New(t, New, kubewasmtest.WithObjects(foo(`{}`)))
	for _, spec := range []string{`{"deploymentName": "web"}`, `{"deploymentName": "web", "replicas": 0}`} {
		if _, err := h.Reconcile(foo(spec)); err != nil {
			t.Fatal(err)
		}
	}
	var got []int64
	for _, d := range h.Host.Applied() {
		n, _ := d.Int64("spec", "replicas")
		got = append(got, n)
	}
	if !reflect.DeepEqual(got, []int64{1, 0}) {
		t.Errorf("replicas %v", got)
	}
}

func TestStatusReportsAvailableReplicasOfTheAppliedDeployment(t *testing.T) {
	f := foo(`{"deploymentName": "web", "replicas": 3}`)
	owned := expectedDeployment("3")
	owned["status"] = map[string]any{"availableReplicas": 2}
	h := kubewasmtest.New(t, New, kubewasmtest.WithObjects(f, owned))
	if _, err := h.Reconcile(f); err != nil {
		t.Fatal(err)
	}
	same(t, "status", h.Host.StatusApplied(), []kubewasm.Object{expectedStatus("2")})
}

func TestMissingDeploymentNameIsAWarning(t *testing.T) {
	for _, spec := range []string{`{}`, `{"deploymentName": ""}`, `{"deploymentName": null}`} {
		h := kubewasmtest.New(t, New)
		if _, err := h.Reconcile(foo(spec)); err != nil {
			t.Fatal(err)
		}
		want := []kubewasm.Event{{
			Regarding: kubewasm.ObjectRef{GVK: Foo, Namespace: "default", Name: "example-foo"},
			Type:      kubewasm.Warning, Reason: "InvalidSpec", Action: "Reconcile", Note: "spec.deploymentName must be set",
		}}
		if len(h.Host.Calls) != 0 || !reflect.DeepEqual(h.Host.Events, want) {
			t.Errorf("%s: calls %v, events %+v", spec, h.Host.Calls, h.Host.Events)
		}
	}
}

func TestForeignDeploymentIsLeftAlone(t *testing.T) {
	for _, owners := range []string{
		`[]`,
		`[{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "other", "uid": "other-uid", "controller": true}]`,
		`[{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "example-foo", "uid": "foo-uid"}]`,
	} {
		f := foo(`{"deploymentName": "web"}`)
		taken := kubewasmtest.Parse(`{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default", "ownerReferences": ` + owners + `}}`)
		h := kubewasmtest.New(t, New, kubewasmtest.WithObjects(f, taken))
		if _, err := h.Reconcile(f); err != nil {
			t.Fatal(err)
		}
		if len(h.Host.Calls) != 0 || len(h.Host.Events) != 1 {
			t.Fatalf("%s: calls %v, events %v", owners, h.Host.Calls, h.Host.Events)
		}
		e := h.Host.Events[0]
		if e.Type != kubewasm.Warning || e.Reason != "ErrResourceExists" || e.Note != `Resource "web" already exists and is not managed by Foo` {
			t.Errorf("%+v", e)
		}
	}
}

func TestHostErrorsPropagate(t *testing.T) {
	h := kubewasmtest.New(t, New)
	h.Host.Fail("apply-status", kubewasm.NewError(kubewasm.CodeForbidden, "no"), 1)
	if _, err := h.Reconcile(foo(`{"deploymentName": "web"}`)); !kubewasm.IsForbidden(err) {
		t.Errorf("%v", err)
	}
}
