package kubewasmtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

var configSet = kubewasm.GVK{Group: "example.com", Version: "v1", Kind: "ConfigSet"}

// configSets makes one ConfigMap per ConfigSet, its data the parent's spec.data plus the keys of
// the Secrets the parent names in spec.secrets, and reports whether the ConfigMap exists.
type configSets struct{ suffix string }

type configSetSettings struct {
	Suffix string `json:"suffix"`
}

func newConfigSets(s configSetSettings) (*configSets, error) {
	if s.Suffix == "" {
		s.Suffix = "config"
	}
	return &configSets{suffix: s.Suffix}, nil
}

func (c *configSets) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("configsets", "0.1.0").
		Primary(configSet).
		Child(kinds.ConfigMap, kubewasm.InPlace).
		Finalizer("example.com/cleanup").
		Permission(kinds.Secret, kubewasm.VerbList)
}

func (c *configSets) Customize(ctx *kubewasm.Context, parent kubewasm.Object) ([]kubewasm.RelatedRule, error) {
	var spec struct {
		Secrets []string `json:"secrets"`
	}
	if err := parent.Decode(&spec, "spec"); err != nil {
		return nil, err
	}
	if parent.Name() == "both" {
		return []kubewasm.RelatedRule{{GVK: kinds.Secret, Names: []string{"a"}, LabelSelector: "x=y"}}, nil
	}
	return []kubewasm.RelatedRule{kubewasm.RelatedNamed(kinds.Secret, parent.Namespace(), spec.Secrets...)}, nil
}

func (c *configSets) Sync(ctx *kubewasm.Context, req *kubewasm.SyncRequest) (*kubewasm.SyncResponse, error) {
	switch req.Parent.Name() {
	case "writes":
		if _, err := ctx.Apply(kubewasm.NewObject(kinds.ConfigMap, "ns", "direct")); err != nil {
			return nil, err
		}
	case "events":
		if err := ctx.Event(req.Parent, kubewasm.Normal, "Synced", "Sync", ""); err != nil {
			return nil, err
		}
	case "panics":
		panic("oh no")
	}
	data := map[string]any{}
	for k, v := range req.Parent.Map("spec", "data") {
		data[k] = v
	}
	for _, s := range req.Related(kinds.Secret) {
		data["secret-"+s.Name()] = "present"
	}
	cm := kubewasm.NewObject(kinds.ConfigMap, "", req.Parent.Name()+"-"+c.suffix)
	cm["data"] = data
	ctx.Info("synced", "children", len(req.Children(kinds.ConfigMap)))
	return &kubewasm.SyncResponse{
		Status:      map[string]any{"ready": len(req.Children(kinds.ConfigMap)) == 1},
		Children:    []any{cm},
		ResyncAfter: 2500 * time.Microsecond,
	}, nil
}

func (c *configSets) Finalize(ctx *kubewasm.Context, req *kubewasm.SyncRequest) (*kubewasm.SyncResponse, error) {
	// Done once the ConfigMap is gone.
	return &kubewasm.SyncResponse{Finalized: len(req.Children(kinds.ConfigMap)) == 0}, nil
}

func parent(name string) kubewasm.Object {
	obj := kubewasm.NewObject(configSet, "ns", name)
	obj.SetField("uid-"+name, "metadata", "uid")
	obj["spec"] = map[string]any{"data": map[string]any{"k": "v"}, "secrets": []any{"a", "b"}}
	return obj
}

func controlled(obj, owner kubewasm.Object) kubewasm.Object {
	obj.SetField([]any{owner.ControllerOwnerRef()}, "metadata", "ownerReferences")
	return obj
}

func TestTheCompositeHarnessDescribes(t *testing.T) {
	h := NewComposite(t, newConfigSets, WithSettings(`{"suffix": "x"}`))
	c := h.Manifest.Composition
	if c == nil || len(c.Children) != 1 || c.Children[0] != (kubewasm.ChildRule{GVK: kinds.ConfigMap, Strategy: kubewasm.InPlace}) || c.Selector != kubewasm.GeneratedSelector {
		t.Errorf("%+v", c)
	}
	if h.Plugin.Composition() != c || len(h.Manifest.Owns) != 1 {
		t.Errorf("owns %v", h.Manifest.Owns)
	}
	if _, err := DescribeComposite(newConfigSets, WithSettings(`{"sufix": "x"}`)); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("refusal: %v", err)
	}
	// A plain controller's harness answers no composition.
	if plain := New(t, newSummarizer); plain.Manifest.Composition != nil || plain.Plugin.Composition() != nil {
		t.Error("a Controller has no composition")
	}
}

func TestSyncAnswersTheDesiredChildrenAndStatus(t *testing.T) {
	p := parent("a")
	h := NewComposite(t, newConfigSets, WithObjects(p))
	got, err := h.Sync(p)
	if err != nil {
		t.Fatal(err)
	}
	cm, ok := got.Child(kinds.ConfigMap, "a-config")
	if !ok || cm.Map("data")["k"] != "v" || len(got.Children) != 1 {
		t.Errorf("children %v", got.Children)
	}
	if ready, _ := got.Status.Bool("ready"); ready || got.Status == nil {
		t.Errorf("status %v: no ConfigMap yet", got.Status)
	}
	if got.ResyncAfter != 3*time.Millisecond || got.Finalized {
		t.Errorf("resync %v, finalized %v", got.ResyncAfter, got.Finalized)
	}
	if len(h.Host.Calls) != 0 {
		t.Errorf("a sync writes nothing itself: %+v", h.Host.Calls)
	}
	// The children in the store that the parent controls are handed, others are not.
	mine := controlled(kubewasm.NewObject(kinds.ConfigMap, "ns", "a-config"), p)
	theirs := controlled(kubewasm.NewObject(kinds.ConfigMap, "ns", "b-config"), parent("b"))
	elsewhere := controlled(kubewasm.NewObject(kinds.ConfigMap, "other", "a-config"), p)
	h.Host.Add(mine, theirs, elsewhere, kubewasm.NewObject(kinds.ConfigMap, "ns", "orphan"))
	got, err = h.Sync(p)
	if ready, _ := got.Status.Bool("ready"); err != nil || !ready {
		t.Errorf("status %v %v", got.Status, err)
	}
	// WithChildren hands other children.
	got, _ = h.Sync(p, WithChildren())
	if ready, _ := got.Status.Bool("ready"); ready {
		t.Error("WithChildren() hands none")
	}
}

func TestRelatedObjectsComeFromCustomizeOrWithRelated(t *testing.T) {
	p := parent("a")
	secret := func(ns, name string) kubewasm.Object { return kubewasm.NewObject(kinds.Secret, ns, name) }
	h := NewComposite(t, newConfigSets, WithObjects(secret("ns", "a"), secret("ns", "c"), secret("other", "b")))
	rules, err := h.Customize(p)
	if err != nil || len(rules) != 1 || rules[0].Namespace != "ns" || strings.Join(rules[0].Names, ",") != "a,b" {
		t.Errorf("%+v %v", rules, err)
	}
	got, err := h.Sync(p)
	cm, _ := got.Child(kinds.ConfigMap, "a-config")
	if err != nil || cm.Map("data")["secret-a"] != "present" || len(cm.Map("data")) != 2 {
		t.Errorf("the rules' objects from the store: %v %v", cm, err)
	}
	got, _ = h.Sync(p, WithRelated(secret("x", "z")))
	if cm, _ := got.Child(kinds.ConfigMap, "a-config"); cm.Map("data")["secret-z"] != "present" || len(cm.Map("data")) != 2 {
		t.Errorf("WithRelated: %v", cm)
	}
	if _, err := h.Sync(parent("both")); !errors.Is(err, kubewasm.ErrInvalid) || !strings.Contains(err.Error(), "names and label-selector together") {
		t.Errorf("a rule with names and a selector: %v", err)
	}
}

func TestWritesAndEventsAreRefusedDuringSync(t *testing.T) {
	h := NewComposite(t, newConfigSets)
	_, err := h.Sync(parent("writes"))
	want := "patch ConfigMap.v1 refused: " + Composing
	if !errors.Is(err, kubewasm.ErrForbidden) || err.Error() != want {
		t.Errorf("%v, want %q", err, want)
	}
	if _, ok := h.Host.Object(kinds.ConfigMap, "ns", "direct"); ok || len(h.Host.Writes("apply")) != 1 {
		t.Error("refused, and recorded")
	}
	if _, err := h.Sync(parent("events")); !errors.Is(err, kubewasm.ErrForbidden) || !strings.HasPrefix(err.Error(), "an Event refused: ") || len(h.Host.Events) != 0 {
		t.Errorf("%v", err)
	}
	if h.Host.CacheOnly != "" {
		t.Error("the fake host takes writes again after the call")
	}
	if _, err := kubewasm.NewContext(h.Host, kubewasm.ObjectKey{}, 0).Apply(kubewasm.NewObject(kinds.ConfigMap, "ns", "direct")); err != nil {
		t.Errorf("outside a sync: %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "oh no" {
				t.Errorf("a panic is not recovered (it traps): %v", r)
			}
			if h.Host.CacheOnly != "" {
				t.Error("restored after a panic too")
			}
		}()
		_, _ = h.Sync(parent("panics"))
	}()
}

func TestFinalizeIsFinalizedOnceTheChildrenAreGone(t *testing.T) {
	p := parent("a")
	h := NewComposite(t, newConfigSets)
	got, err := h.Finalize(p, WithChildren(controlled(kubewasm.NewObject(kinds.ConfigMap, "ns", "a-config"), p)))
	if err != nil || got.Finalized || len(got.Children) != 0 || got.Status != nil {
		t.Errorf("%+v %v", got, err)
	}
	if got, err := h.Finalize(p); err != nil || !got.Finalized {
		t.Errorf("%+v %v", got, err)
	}
}

func TestWithChildrenOfAnotherKindIsATestBug(t *testing.T) {
	h := NewComposite(t, newConfigSets)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "not of a child kind") {
			t.Errorf("%v", r)
		}
	}()
	_, _ = h.Sync(parent("a"), WithChildren(kubewasm.NewObject(kinds.Secret, "ns", "s")))
}
