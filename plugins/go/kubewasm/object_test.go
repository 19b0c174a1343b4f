package kubewasm

import (
	"encoding/json"
	"reflect"
	"testing"
)

func mustParse(t *testing.T, text string) Object {
	t.Helper()
	obj, err := ParseObject([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

const foo = `{
  "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
  "metadata": {"name": "example", "namespace": "default", "uid": "foo-uid", "generation": 9007199254740993,
    "resourceVersion": "42", "labels": {"app": "web"}, "annotations": {"a.io/b": "c"}, "finalizers": ["x.io/f"]},
  "spec": {"deploymentName": "web", "replicas": 3, "ratio": 0.5, "on": true, "list": [1, 2]},
  "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Up", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
}`

func TestObjectReadsMetadataAndFields(t *testing.T) {
	o := mustParse(t, foo)
	if o.GVK() != (GVK{"samplecontroller.k8s.io", "v1alpha1", "Foo"}) || o.APIVersion() != "samplecontroller.k8s.io/v1alpha1" {
		t.Errorf("gvk %v", o.GVK())
	}
	if o.Name() != "example" || o.Namespace() != "default" || o.UID() != "foo-uid" || o.ResourceVersion() != "42" {
		t.Errorf("metadata %v", o["metadata"])
	}
	if o.Generation() != 9007199254740993 {
		t.Errorf("large integers stay exact: %d", o.Generation())
	}
	if o.Key() != (ObjectKey{"default", "example"}) || o.Key().String() != "default/example" {
		t.Errorf("key %v", o.Key())
	}
	if s, ok := o.String("spec", "deploymentName"); !ok || s != "web" {
		t.Errorf("string %q %v", s, ok)
	}
	if n, ok := o.Int64("spec", "replicas"); !ok || n != 3 {
		t.Errorf("int %d %v", n, ok)
	}
	if _, ok := o.Int64("spec", "ratio"); ok {
		t.Error("0.5 is not an integer")
	}
	if f, ok := o.Float64("spec", "ratio"); !ok || f != 0.5 {
		t.Errorf("float %v", f)
	}
	if b, ok := o.Bool("spec", "on"); !ok || !b {
		t.Error("bool")
	}
	if _, ok := o.Field("spec", "missing", "deeper"); ok {
		t.Error("a missing field is not there")
	}
	if len(o.Slice("spec", "list")) != 2 || o.Map("spec")["deploymentName"] != "web" {
		t.Error("slice/map")
	}
	if o.Label("app") != "web" || !o.HasLabel("app") || o.HasLabel("x") || o.Annotation("a.io/b") != "c" || !o.HasAnnotation("a.io/b") {
		t.Error("labels/annotations")
	}
	var spec struct {
		DeploymentName string `json:"deploymentName"`
		Replicas       *int32 `json:"replicas"`
	}
	if err := o.Decode(&spec, "spec"); err != nil || spec.DeploymentName != "web" || *spec.Replicas != 3 {
		t.Errorf("decode %+v %v", spec, err)
	}
	var missing struct{ X int }
	if err := o.Decode(&missing, "nothing"); err != nil {
		t.Errorf("decoding a missing field leaves the value: %v", err)
	}
	if err := o.Decode(&missing, "spec", "deploymentName"); err == nil {
		t.Error("decoding a string into a struct fails")
	}
}

func TestObjectWritersCreateWhatTheyNeed(t *testing.T) {
	o := NewObject(GVK{"apps", "v1", "Deployment"}, "team-a", "web")
	if o.APIVersion() != "apps/v1" || o.Namespace() != "team-a" {
		t.Errorf("%v", o)
	}
	if _, ok := NewObject(GVK{Version: "v1", Kind: "Node"}, "", "n")["metadata"].(map[string]any)["namespace"]; ok {
		t.Error("a cluster-scoped object has no namespace")
	}
	o.SetLabel("app", "web")
	o.SetAnnotation("k", "v")
	o.SetField(int64(2), "spec", "replicas")
	if o.Label("app") != "web" || o.Annotation("k") != "v" {
		t.Error("set label/annotation")
	}
	if n, _ := o.Int64("spec", "replicas"); n != 2 {
		t.Error("set field")
	}
	if !o.RemoveField("spec", "replicas") || o.RemoveField("spec", "replicas") {
		t.Error("remove field")
	}
	if !o.AddFinalizer("a/b") || o.AddFinalizer("a/b") || !o.HasFinalizer("a/b") {
		t.Error("add finalizer")
	}
	if !o.RemoveFinalizer("a/b") || o.RemoveFinalizer("a/b") || len(o.Finalizers()) != 0 {
		t.Error("remove finalizer")
	}
	if o.IsDeleting() {
		t.Error("not deleting")
	}
	o.SetField("2024-01-01T00:00:00Z", "metadata", "deletionTimestamp")
	if !o.IsDeleting() {
		t.Error("deleting")
	}
}

func TestOwnerReferences(t *testing.T) {
	owner := mustParse(t, foo)
	child := NewObject(GVK{"apps", "v1", "Deployment"}, "default", "web")
	if child.IsControlledBy(owner) {
		t.Error("no references yet")
	}
	child.SetField([]any{owner.ControllerOwnerRef()}, "metadata", "ownerReferences")
	// Through JSON, as the host would hand it back.
	text, _ := json.Marshal(child)
	child = mustParse(t, string(text))
	if !child.IsControlledBy(owner) {
		t.Errorf("controlled: %v", child.OwnerReferences())
	}
	want := map[string]any{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "example", "uid": "foo-uid", "controller": true, "blockOwnerDeletion": true}
	if got := child.Slice("metadata", "ownerReferences")[0]; !reflect.DeepEqual(got, want) {
		t.Errorf("owner reference %v", got)
	}
	plain := NewObject(GVK{"apps", "v1", "Deployment"}, "default", "web")
	plain.SetField([]any{owner.OwnerRef()}, "metadata", "ownerReferences")
	if plain.IsControlledBy(owner) {
		t.Error("an owner reference without controller: true does not control")
	}
	other := mustParse(t, `{"apiVersion":"v1","kind":"Foo","metadata":{"name":"x","uid":"other"}}`)
	if child.IsControlledBy(other) {
		t.Error("another uid")
	}
}

func TestConditionsAndStatus(t *testing.T) {
	o := mustParse(t, foo)
	if !o.IsConditionTrue("Ready") || o.ConditionStatus("Missing") != "" {
		t.Error("read conditions")
	}
	if o.SetCondition(Condition{Type: "Ready", Status: "True", Reason: "Up"}) {
		t.Error("an unchanged condition is not a change")
	}
	if c, _ := o.Condition("Ready"); c.LastTransitionTime != "2024-01-01T00:00:00Z" {
		t.Error("the transition time stays")
	}
	if !o.SetCondition(Condition{Type: "Ready", Status: "False", Reason: "Down", ObservedGeneration: 4, LastTransitionTime: "2025-01-01T00:00:00Z"}) {
		t.Error("a new status is a change")
	}
	if c, _ := o.Condition("Ready"); c.Status != "False" || c.LastTransitionTime != "2025-01-01T00:00:00Z" || c.ObservedGeneration != 4 {
		t.Errorf("%+v", c)
	}
	if !o.SetCondition(Condition{Type: "Synced", Status: "Unknown"}) || len(o.Conditions()) != 2 {
		t.Error("a new condition is appended")
	}
	if !o.RemoveCondition("Synced") || o.RemoveCondition("Synced") {
		t.Error("remove condition")
	}
	status := o.StatusObject(map[string]any{"observedGeneration": o.Generation()})
	want := map[string]any{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": map[string]any{"name": "example", "namespace": "default"}, "status": map[string]any{"observedGeneration": int64(9007199254740993)}}
	if !reflect.DeepEqual(map[string]any(status), want) {
		t.Errorf("status object %v", status)
	}
}

func TestConversions(t *testing.T) {
	type typed struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
	}
	o, err := ToObject(typed{"v1", "ConfigMap", map[string]string{"name": "a"}})
	if err != nil || o.Name() != "a" || o.Kind() != "ConfigMap" {
		t.Errorf("%v %v", o, err)
	}
	var back typed
	if err := o.Into(&back); err != nil || back.Metadata["name"] != "a" {
		t.Errorf("%v %v", back, err)
	}
	if _, err := ParseObject([]byte(`[1]`)); err == nil {
		t.Error("a list is not an object")
	}
	if _, err := ParseObject([]byte(`null`)); err == nil {
		t.Error("null is not an object")
	}
	copied := o.DeepCopy()
	copied.SetLabel("x", "y")
	if o.HasLabel("x") {
		t.Error("a deep copy shares nothing")
	}
	if ParseAPIVersion("v1", "Node") != (GVK{"", "v1", "Node"}) || (GVK{"apps", "v1", "Deployment"}).String() != "Deployment.v1.apps" {
		t.Error("gvk")
	}
	keys := SortedKeys([]Object{NewObject(GVK{Version: "v1", Kind: "Node"}, "", "b"), NewObject(GVK{Version: "v1", Kind: "Node"}, "", "a")})
	if keys[0].Name != "a" || keys[1].Name != "b" {
		t.Errorf("%v", keys)
	}
}
