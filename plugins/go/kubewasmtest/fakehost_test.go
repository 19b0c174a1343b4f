package kubewasmtest

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

func cm(ns, name string, labels map[string]any) kubewasm.Object {
	obj := kubewasm.NewObject(kinds.ConfigMap, ns, name)
	if labels != nil {
		obj.SetField(labels, "metadata", "labels")
	}
	obj["data"] = map[string]any{"k": "v"}
	return obj
}

func ctxOf(h *FakeHost) *kubewasm.Context { return kubewasm.NewContext(h, kubewasm.ObjectKey{}, 0) }

func TestTheStoreServesTheCache(t *testing.T) {
	h := NewFakeHost(cm("b", "x", map[string]any{"app": "web"}), cm("a", "y", map[string]any{"app": "db"}), cm("a", "x", nil))
	ctx := ctxOf(h)
	got, err := ctx.Get(kinds.ConfigMap, "a", "x")
	if err != nil || got.UID() == "" || got.ResourceVersion() == "" {
		t.Errorf("uid and resourceVersion are filled in: %v %v", got, err)
	}
	if _, err := ctx.Get(kinds.ConfigMap, "a", "missing"); !kubewasm.IsNotFound(err) {
		t.Errorf("%v", err)
	}
	all, _ := ctx.List(kinds.ConfigMap)
	if keys := kubewasm.SortedKeys(all); len(all) != 3 || all[0].Key() != keys[0] || all[0].Key() != (kubewasm.ObjectKey{Namespace: "a", Name: "x"}) {
		t.Errorf("sorted by namespace then name: %v", keys)
	}
	inA, _ := ctx.List(kinds.ConfigMap, kubewasm.InNamespace("a"))
	web, _ := ctx.List(kinds.ConfigMap, kubewasm.MatchingLabels("app=web"))
	if len(inA) != 2 || len(web) != 1 || web[0].Name() != "x" {
		t.Errorf("%d %d", len(inA), len(web))
	}
	if _, err := ctx.List(kinds.ConfigMap, kubewasm.MatchingLabels("a,,b")); !errors.Is(err, kubewasm.ErrInvalid) {
		t.Errorf("bad selector: %v", err)
	}
	// Copies: changing what Get returned changes nothing stored.
	got.SetLabel("changed", "yes")
	if again, _ := ctx.Get(kinds.ConfigMap, "a", "x"); again.HasLabel("changed") {
		t.Error("the cache handed out its own object")
	}
}

func TestListControlledServesAParentsChildren(t *testing.T) {
	parent := Parse(`{"apiVersion":"example.com/v1","kind":"Parent","metadata":{"name":"p","namespace":"a","uid":"uid-p"}}`)
	other := Parse(`{"apiVersion":"example.com/v1","kind":"Parent","metadata":{"name":"q","namespace":"a","uid":"uid-q"}}`)
	child := func(ns, name string, ref kubewasm.OwnerReference) kubewasm.Object {
		obj := cm(ns, name, nil)
		obj.SetField([]any{map[string]any{"apiVersion": ref.APIVersion, "kind": ref.Kind, "name": ref.Name, "uid": ref.UID, "controller": ref.IsController()}}, "metadata", "ownerReferences")
		obj.SetField([]any{map[string]any{"manager": "m"}}, "metadata", "managedFields")
		return obj
	}
	secret := child("a", "s", parent.ControllerOwnerRef())
	secret["kind"] = "Secret"
	h := NewFakeHost(
		child("a", "y", parent.ControllerOwnerRef()),
		child("a", "x", parent.ControllerOwnerRef()),
		child("b", "z", parent.ControllerOwnerRef()),
		child("a", "w", other.ControllerOwnerRef()),
		child("a", "v", parent.OwnerRef()),
		cm("a", "u", nil),
		secret,
	)
	ctx := ctxOf(h)
	names := func(objs []kubewasm.Object, err error) string {
		if err != nil {
			return err.Error()
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.Namespace()+"/"+o.Name())
		}
		return strings.Join(out, " ")
	}
	if got := names(ctx.ListControlled(kinds.ConfigMap, "uid-p")); got != "a/x a/y b/z" {
		t.Errorf("every namespace, controller references only, sorted: %s", got)
	}
	if got := names(ctx.ListControlled(kinds.ConfigMap, "uid-p", kubewasm.InNamespace("a"))); got != "a/x a/y" {
		t.Errorf("one namespace: %s", got)
	}
	if got := names(ctx.ListControlled(kinds.ConfigMap, "uid-q")); got != "a/w" {
		t.Errorf("another owner: %s", got)
	}
	if got, err := ctx.ListControlled(kinds.ConfigMap, "uid-none"); err != nil || len(got) != 0 {
		t.Errorf("no children: %v %v", got, err)
	}
	var typed []struct {
		Data map[string]string `json:"data"`
	}
	if err := kubewasm.ListControlledInto(ctx, kinds.ConfigMap, "uid-p", &typed, kubewasm.InNamespace("a")); err != nil || len(typed) != 2 || typed[0].Data["k"] != "v" {
		t.Errorf("typed, whole objects: %v %v", typed, err)
	}
	h.MetadataOnly = []kubewasm.GVK{kinds.ConfigMap}
	got, err := ctx.ListControlled(kinds.ConfigMap, "uid-p", kubewasm.InNamespace("b"))
	if err != nil || len(got) != 1 {
		t.Fatalf("%v %v", got, err)
	}
	if _, hasData := got[0]["data"]; hasData || got[0].Slice("metadata", "managedFields") != nil {
		t.Errorf("a metadata-only kind is handed its metadata, without managedFields: %v", got[0])
	}
	if stored, _ := h.Object(kinds.ConfigMap, "b", "z"); stored.Slice("metadata", "managedFields") == nil {
		t.Errorf("the store keeps the whole object: %v", stored)
	}
	h.Fail("cache-list-controlled", kubewasm.NewError(kubewasm.CodeForbidden, "no"), 1)
	if _, err := ctx.ListControlled(kinds.ConfigMap, "uid-p"); !errors.Is(err, kubewasm.ErrForbidden) {
		t.Errorf("injected failure: %v", err)
	}
}

func TestWritesChangeTheStoreAndAreRecorded(t *testing.T) {
	h := NewFakeHost()
	ctx := ctxOf(h)
	created, err := ctx.Apply(cm("a", "x", nil))
	if err != nil || created.Generation() != 1 {
		t.Fatalf("%v %v", created, err)
	}
	spec := kubewasm.NewObject(kinds.ConfigMap, "a", "x")
	spec["spec"] = map[string]any{"n": 1}
	updated, _ := ctx.Apply(spec)
	if updated.Generation() != 2 || updated["data"] == nil {
		t.Errorf("apply merges, and a spec change bumps the generation: %v", updated)
	}
	if _, err := ctx.Create(cm("a", "x", nil)); !kubewasm.IsAlreadyExists(err) {
		t.Errorf("%v", err)
	}
	stale := updated.DeepCopy()
	stale.SetField("1", "metadata", "resourceVersion")
	if _, err := ctx.Update(stale); !kubewasm.IsConflict(err) {
		t.Errorf("stale update: %v", err)
	}
	if _, err := ctx.Update(updated); err != nil {
		t.Errorf("current update: %v", err)
	}
	status, err := ctx.ApplyStatus(updated.StatusObject(map[string]any{"ready": true}))
	if ready, _ := status.Bool("status", "ready"); err != nil || !ready {
		t.Errorf("%v %v", status, err)
	}
	if _, err := ctx.ApplyStatus(kubewasm.NewObject(kinds.ConfigMap, "a", "gone")); !kubewasm.IsNotFound(err) {
		t.Errorf("%v", err)
	}
	patched, err := ctx.Patch(kinds.ConfigMap, "a", "x", kubewasm.MergePatch, map[string]any{"data": map[string]any{"k": nil, "new": "1"}})
	if err != nil || patched.Map("data")["new"] != "1" || patched.Map("data")["k"] != nil {
		t.Errorf("merge patch deletes nulls: %v %v", patched, err)
	}
	ops := []any{
		map[string]any{"op": "test", "path": "/data/new", "value": "1"},
		map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]any{"a/b": "c"}},
		map[string]any{"op": "add", "path": "/list", "value": []any{"x"}},
		map[string]any{"op": "add", "path": "/list/-", "value": "y"},
		map[string]any{"op": "remove", "path": "/list/0"},
	}
	patched, err = ctx.Patch(kinds.ConfigMap, "a", "x", kubewasm.JSONPatch, ops)
	if err != nil || patched.Label("a/b") != "c" || !reflect.DeepEqual(patched.Slice("list"), []any{"y"}) {
		t.Errorf("json patch: %v %v", patched, err)
	}
	failing := []any{map[string]any{"op": "test", "path": "/data/new", "value": "2"}}
	if _, err := ctx.Patch(kinds.ConfigMap, "a", "x", kubewasm.JSONPatch, failing); !errors.Is(err, kubewasm.ErrInvalid) {
		t.Errorf("failed test op: %v", err)
	}
	if err := ctx.Delete(kinds.ConfigMap, "a", "x"); err != nil {
		t.Error(err)
	}
	if err := ctx.Delete(kinds.ConfigMap, "a", "x"); !kubewasm.IsNotFound(err) {
		t.Errorf("%v", err)
	}
	var ops2 []string
	for _, c := range h.Calls {
		ops2 = append(ops2, c.Op)
	}
	want := []string{"apply", "apply", "create", "update", "update", "apply-status", "apply-status", "patch", "patch", "patch", "delete", "delete"}
	if !reflect.DeepEqual(ops2, want) {
		t.Errorf("calls %v", ops2)
	}
	if len(h.Applied()) != 2 || len(h.StatusApplied()) != 2 || !h.Calls[0].Force {
		t.Error("recorded applies")
	}
}

func TestInjectedFailures(t *testing.T) {
	h := NewFakeHost(cm("a", "x", nil))
	h.Fail("cache-get", kubewasm.NewError(kubewasm.CodeUnavailable, "try later"), 1)
	ctx := ctxOf(h)
	if _, err := ctx.Get(kinds.ConfigMap, "a", "x"); !errors.Is(err, kubewasm.ErrUnavailable) {
		t.Errorf("%v", err)
	}
	if _, err := ctx.Get(kinds.ConfigMap, "a", "x"); err != nil {
		t.Errorf("only once: %v", err)
	}
}

func TestEventsAndLogsAreRecorded(t *testing.T) {
	h := NewFakeHost()
	ctx := ctxOf(h)
	obj := cm("a", "x", nil)
	_ = ctx.Event(obj, kubewasm.Warning, "Why", "What", "note")
	ctx.Info("hello", "k", 1)
	if len(h.Events) != 1 || h.Events[0].Reason != "Why" || h.Events[0].Regarding.Name != "x" {
		t.Errorf("%+v", h.Events)
	}
	if len(h.Logs) != 1 || h.Logs[0].Fields["k"] != "1" || h.Logs[0].Level != kubewasm.LevelInfo {
		t.Errorf("%+v", h.Logs)
	}
}

// The shared table the host's parser is held to: JSON written as YAML, read with encoding/json
// once the comment lines are dropped.
func TestLabelSelectorsSelectWhatTheHostSelects(t *testing.T) {
	text, err := os.ReadFile("../../../tests/cases/selectors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			lines = append(lines, line)
		}
	}
	var cases []struct {
		Selector string              `json:"selector"`
		Invalid  bool                `json:"invalid"`
		Match    []map[string]string `json:"match"`
		Miss     []map[string]string `json:"miss"`
	}
	if err := json.Unmarshal([]byte(strings.Join(lines, "\n")), &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 30 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		if _, err := ParseSelector(c.Selector); c.Invalid {
			if !errors.Is(err, kubewasm.ErrInvalid) {
				t.Errorf("%q: %v, want it refused", c.Selector, err)
			}
			continue
		} else if err != nil {
			t.Errorf("%q: %v", c.Selector, err)
			continue
		}
		for _, labels := range c.Match {
			if ok, _ := MatchLabels(labels, c.Selector); !ok {
				t.Errorf("%q should select %v", c.Selector, labels)
			}
		}
		for _, labels := range c.Miss {
			if ok, _ := MatchLabels(labels, c.Selector); ok {
				t.Errorf("%q should not select %v", c.Selector, labels)
			}
		}
	}
}

type summarySettings struct {
	Suffix string `json:"suffix"`
}

func (s *summarySettings) Default() { s.Suffix = "summary" }

type summarizer struct{ suffix string }

func newSummarizer(s summarySettings) (*summarizer, error) {
	if s.Suffix == "" {
		return nil, errors.New("suffix must not be empty")
	}
	return &summarizer{s.Suffix}, nil
}

func (s *summarizer) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("summarizer", "0.1.0").Primary(kinds.ConfigMap).Permission(kinds.ConfigMap, kubewasm.VerbCreate, kubewasm.VerbPatch)
}

func (s *summarizer) Reconcile(ctx *kubewasm.Context, obj kubewasm.Object) (kubewasm.Result, error) {
	summary := kubewasm.NewObject(kinds.ConfigMap, obj.Namespace(), obj.Name()+"-"+s.suffix)
	summary.SetField([]any{obj.ControllerOwnerRef()}, "metadata", "ownerReferences")
	_, err := ctx.Apply(summary)
	return kubewasm.Result{}, err
}

func TestHarness(t *testing.T) {
	obj := cm("a", "x", nil)
	h := New(t, newSummarizer, WithObjects(obj), WithSettings(map[string]any{"suffix": "index"}))
	if h.Manifest.Name != "summarizer" {
		t.Errorf("%+v", h.Manifest)
	}
	if _, err := h.ReconcileKey(kubewasm.ObjectKey{Namespace: "a", Name: "x"}); err != nil {
		t.Fatal(err)
	}
	applied := h.Host.Applied()
	if len(applied) != 1 || applied[0].Name() != "x-index" {
		t.Errorf("%v", applied)
	}
	if stored, ok := h.Host.Object(kinds.ConfigMap, "a", "x-index"); !ok || stored.OwnerReferences()[0].Name != "x" {
		t.Errorf("%v", stored)
	}
	if _, err := Describe(newSummarizer, WithSettings(`{"suffix": ""}`)); err == nil || err.Error() != "suffix must not be empty" {
		t.Errorf("refused: %v", err)
	}
	if _, err := Describe(newSummarizer, WithSettings(`{"sufix": "x"}`)); err == nil {
		t.Error("an unknown setting is refused")
	}
	h.Host.Fail("apply", kubewasm.NewError(kubewasm.CodeForbidden, "no"), 1)
	if _, err := h.Reconcile(obj); !kubewasm.IsForbidden(err) {
		t.Errorf("%v", err)
	}
}

// counter reads its Deployment's Pods and maps Secrets to Deployments, both metadata-only.
type counter struct {
	get, whole kubewasm.Object
	list       []kubewasm.Object
	mapped     kubewasm.Object
}

func newCounter(kubewasm.NoSettings) (*counter, error) { return &counter{}, nil }

func (c *counter) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("counter", "0.1.0").
		Primary(kinds.Deployment).
		Owns(kinds.Pod).
		Watches(kinds.Secret, kubewasm.ByMapRelated()).
		Watches(kinds.ConfigMap, kubewasm.ByMapRelated()).
		MetadataOnly(kinds.Pod).
		MetadataOnly(kinds.Secret)
}

func (c *counter) Reconcile(ctx *kubewasm.Context, obj kubewasm.Object) (result kubewasm.Result, err error) {
	if c.get, err = ctx.Get(kinds.Pod, "default", "p"); err != nil {
		return result, err
	}
	if c.list, err = ctx.List(kinds.Pod, kubewasm.InNamespace("default")); err != nil {
		return result, err
	}
	c.whole, err = ctx.Get(kinds.ConfigMap, "default", "c")
	return result, err
}

func (c *counter) MapRelated(ctx *kubewasm.Context, gvk kubewasm.GVK, obj kubewasm.Object) ([]kubewasm.ObjectKey, error) {
	c.mapped = obj
	return []kubewasm.ObjectKey{{Namespace: "default", Name: "d"}}, nil
}

func TestTheFakeHostHandsMetadataOnlyKindsAsTheHostDoes(t *testing.T) {
	const metadata = `"metadata":{"name":"p","namespace":"default","uid":"pod-uid","resourceVersion":"7","labels":{"app":"web"}`
	pod := Parse(`{"apiVersion":"v1","kind":"Pod",` + metadata + `,"managedFields":[{"manager":"kubelet"}]},"spec":{"containers":[]},"status":{"phase":"Running"}}`)
	whole := cm("default", "c", nil)
	h := New(t, newCounter, WithObjects(kubewasm.NewObject(kinds.Deployment, "default", "d"), pod, whole))
	if got := h.Plugin.MetadataOnly(); !reflect.DeepEqual(got, []kubewasm.GVK{kinds.Pod, kinds.Secret}) || !reflect.DeepEqual(h.Host.MetadataOnly, got) {
		t.Errorf("the views export answers %v, the fake host hands %v", got, h.Host.MetadataOnly)
	}
	if _, err := h.ReconcileKey(kubewasm.ObjectKey{Namespace: "default", Name: "d"}); err != nil {
		t.Fatal(err)
	}
	c := h.Plugin.Controller().(*counter)
	handed := Parse(`{"apiVersion":"v1","kind":"Pod",` + metadata + `}}`)
	if !Equal(c.get, handed) || len(c.list) != 1 || !Equal(c.list[0], handed) {
		t.Errorf("get %v, list %v: want %v", c.get, c.list, handed)
	}
	if stored, _ := h.Host.Object(kinds.ConfigMap, "default", "c"); !Equal(c.whole, stored) {
		t.Errorf("a kind not declared is handed whole: %v", c.whole)
	}
	if stored, _ := h.Host.Object(kinds.Pod, "default", "p"); !Equal(stored, pod) {
		t.Errorf("the store keeps the whole object: %v", stored)
	}
	secret := Parse(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"default","managedFields":[]},"data":{"k":"dg=="}}`)
	if keys, err := h.MapRelated(kinds.Secret, secret); err != nil || len(keys) != 1 {
		t.Fatalf("%v %v", keys, err)
	}
	if want := Parse(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"default"}}`); !Equal(c.mapped, want) {
		t.Errorf("map-related got %v, want %v", c.mapped, want)
	}
	if _, err := h.MapRelated(kinds.ConfigMap, whole); err != nil || !Equal(c.mapped, whole) {
		t.Errorf("a kind not declared is mapped whole: %v %v", c.mapped, err)
	}
}

// A projected kind is handed as the host hands it: the request, reads and write answers carry
// the metadata and the declared fields alone, the store keeps whole objects, and Update of the
// kind is refused.
func TestTheFakeHostHandsAProjectedKindAsTheHostDoes(t *testing.T) {
	h := NewFakeHost()
	h.ReadsFields = []kubewasm.FieldsRead{{GVK: kinds.ConfigMap, Fields: []string{"data.keep", "data.keep.deeper", "spec"}}}
	ctx := ctxOf(h)
	whole := cm("a", "x", nil)
	whole["data"] = map[string]any{"keep": "k", "drop": "d"}
	answer, err := ctx.Apply(whole)
	if err != nil {
		t.Fatal(err)
	}
	if got := answer.Map("data"); len(got) != 1 || got["keep"] != "k" {
		t.Errorf("the apply's answer is projected: %v", answer)
	}
	read, err := ctx.Get(kinds.ConfigMap, "a", "x")
	if err != nil || len(read.Map("data")) != 1 || read.Name() != "x" {
		t.Errorf("a read is projected, the metadata kept: %v %v", read, err)
	}
	if stored, _ := h.Object(kinds.ConfigMap, "a", "x"); len(stored.Map("data")) != 2 {
		t.Errorf("the store keeps the whole object: %v", stored)
	}
	if _, err := ctx.Update(read); kubewasm.CodeOf(err) != kubewasm.CodeInvalid || !strings.Contains(err.Error(), "update replaces the whole") {
		t.Errorf("an update of a projected kind: %v", err)
	}
}
