package kubewasmtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// Composing is the rule the host states when it refuses a write or an Event during a
// declarative controller's Customize, Sync or Finalize: FakeHost.CacheOnly during those calls.
const Composing = "a declarative plugin's customize, sync and finalize may read the cache and nothing else (the host makes every write from their answers)"

// CompositeHarness is a declarative controller (a kubewasm.Composite), described and ready to
// call against a FakeHost, the way the component's exports run it. During Customize, Sync and
// Finalize the fake host refuses writes and Events with code forbidden, as the host does.
type CompositeHarness struct {
	// Host is the fake host the controller reads.
	Host *FakeHost
	// Plugin runs the controller (kubewasm.Plugin, as in the component).
	Plugin *kubewasm.Plugin
	// Manifest is what the controller describes to the host; Manifest.Composition is what its
	// describe-composition answers (the child kinds and selector).
	Manifest kubewasm.ManifestSpec
}

// DescribeComposite builds the declarative controller as the host would (the constructor given
// the settings, then Manifest); the error is the refusal the host would report.
func DescribeComposite[S any, C kubewasm.Composite](newComposite func(S) (C, error), opts ...Option) (*CompositeHarness, error) {
	host, plugin, manifest, err := describe(func(host kubewasm.Host) *kubewasm.Plugin { return kubewasm.NewCompositePlugin(newComposite, host) }, opts)
	if err != nil {
		return nil, err
	}
	return &CompositeHarness{Host: host, Plugin: plugin, Manifest: manifest}, nil
}

// NewComposite is DescribeComposite that fails the test when the controller refuses to load.
func NewComposite[S any, C kubewasm.Composite](t testing.TB, newComposite func(S) (C, error), opts ...Option) *CompositeHarness {
	t.Helper()
	h, err := DescribeComposite(newComposite, opts...)
	if err != nil {
		t.Fatalf("describe refused: %v", err)
	}
	return h
}

// SyncOption sets up a Sync or Finalize call: WithChildren, WithRelated.
type SyncOption func(*syncOptions)

type syncOptions struct {
	children, related           []kubewasm.Object
	givenChildren, givenRelated bool
}

// WithChildren hands these objects as the parent's claimed children (none when called without
// any), instead of those the fake host's store holds.
func WithChildren(objects ...kubewasm.Object) SyncOption {
	return func(o *syncOptions) { o.children, o.givenChildren = append(o.children, objects...), true }
}

// WithRelated hands these objects as what the parent's Customize rules selected (none when
// called without any), instead of asking Customize and reading the store.
func WithRelated(objects ...kubewasm.Object) SyncOption {
	return func(o *syncOptions) { o.related, o.givenRelated = append(o.related, objects...), true }
}

// SyncResult is a Sync or Finalize answer as the host gets it: the JSON text the component
// sends, parsed back into Objects.
type SyncResult struct {
	// Status is the parent's whole status; nil when the answer has none (the host then leaves
	// the status as it is).
	Status kubewasm.Object
	// Children are every child that should exist, in the answer's order.
	Children []kubewasm.Object
	// ResyncAfter is the answer's, in the whole milliseconds the host gets; 0 for none.
	ResyncAfter time.Duration
	// Finalized is the answer's (the host reads it from Finalize only).
	Finalized bool
}

// Child is the first answered child of a kind (group and kind) and name.
func (r *SyncResult) Child(gvk kubewasm.GVK, name string) (kubewasm.Object, bool) {
	for _, c := range r.Children {
		if g := c.GVK(); g.Group == gvk.Group && g.Kind == gvk.Kind && c.Name() == name {
			return c, true
		}
	}
	return nil, false
}

// Customize runs Customize on the parent, with writes and Events refused. The error is what the
// component would return; a panic is not recovered (in the component it traps).
func (h *CompositeHarness) Customize(parent kubewasm.Object) ([]kubewasm.RelatedRule, error) {
	defer cacheOnly(h.Host, Composing)()
	return h.Plugin.Customize(text(parent))
}

// Sync runs Sync on the parent, with writes and Events refused, and returns the answer as the
// host gets it. The error is what the component would return (an *kubewasm.Error with the
// code and message the host gets); a panic is not recovered (in the component it traps).
//
// The request is the host's: its children are, for each child kind (the manifest's Child
// kinds, then its other Owns kinds), the objects in the store that the parent controls (a
// controller owner reference with its uid), in its namespace (in every one for a
// cluster-scoped parent) — the harness neither adopts nor releases; its related objects are
// what the parent's Customize rules select from the store (Customize is called first, as the
// host does). WithChildren and WithRelated hand other objects instead.
func (h *CompositeHarness) Sync(parent kubewasm.Object, opts ...SyncOption) (*SyncResult, error) {
	return h.call(kubewasm.MethodSync, parent, false, opts)
}

// Finalize runs Finalize on the parent (a parent being deleted that carries the manifest's
// finalizer), as Sync does.
func (h *CompositeHarness) Finalize(parent kubewasm.Object, opts ...SyncOption) (*SyncResult, error) {
	return h.call(kubewasm.MethodFinalize, parent, true, opts)
}

func text(obj any) string {
	encoded, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("kubewasmtest: object is not JSON: %v", err))
	}
	return string(encoded)
}

func (h *CompositeHarness) call(method kubewasm.Method, parent kubewasm.Object, finalizing bool, opts []SyncOption) (*SyncResult, error) {
	var o syncOptions
	for _, opt := range opts {
		opt(&o)
	}
	request := kubewasm.RawSyncRequest{Parent: text(parent), Finalizing: finalizing}
	if o.givenChildren {
		request.Children = h.group(o.children)
	} else {
		request.Children = h.claim(parent)
	}
	if o.givenRelated {
		request.Related = byKind(o.related)
	} else {
		related, err := h.related(parent)
		if err != nil {
			return nil, err
		}
		request.Related = related
	}
	defer cacheOnly(h.Host, Composing)()
	raw, err := h.Plugin.CallComposite(method, request)
	if err != nil {
		return nil, err
	}
	result := &SyncResult{Finalized: raw.Finalized, ResyncAfter: time.Duration(raw.ResyncAfter) * time.Millisecond}
	if raw.Status != "" {
		result.Status = Parse(raw.Status)
	}
	for _, child := range raw.Children {
		result.Children = append(result.Children, Parse(child))
	}
	return result, nil
}

// childKinds are the manifest's child kinds in the host's order: the Child rules', then the
// other Owns kinds.
func (h *CompositeHarness) childKinds() []kubewasm.GVK {
	var kinds []kubewasm.GVK
	if h.Manifest.Composition != nil {
		for _, r := range h.Manifest.Composition.Children {
			kinds = append(kinds, r.GVK)
		}
	}
	for _, g := range h.Manifest.Owns {
		if !slices.ContainsFunc(kinds, func(k kubewasm.GVK) bool { return sameKind(k, g) }) {
			kinds = append(kinds, g)
		}
	}
	return kinds
}

func sameKind(a, b kubewasm.GVK) bool { return a.Group == b.Group && a.Kind == b.Kind }

// group is objects as one entry per child kind, each sorted by namespace and name.
func (h *CompositeHarness) group(objects []kubewasm.Object) []kubewasm.RawObjects {
	kinds := h.childKinds()
	out := make([]kubewasm.RawObjects, len(kinds))
	for i, k := range kinds {
		var items []kubewasm.Object
		for _, obj := range objects {
			if sameKind(obj.GVK(), k) {
				items = append(items, obj)
			}
		}
		out[i] = raw(k, items)
	}
	for _, obj := range objects {
		if !slices.ContainsFunc(kinds, func(k kubewasm.GVK) bool { return sameKind(k, obj.GVK()) }) {
			panic(fmt.Sprintf("kubewasmtest: WithChildren: %s %s is not of a child kind of the manifest (%v)", obj.GVK(), obj.Key(), kinds))
		}
	}
	return out
}

// claim is the parent's children in the store: per child kind, the objects it controls.
func (h *CompositeHarness) claim(parent kubewasm.Object) []kubewasm.RawObjects {
	kinds := h.childKinds()
	out := make([]kubewasm.RawObjects, len(kinds))
	for i, k := range kinds {
		stored, _ := h.Host.list(k, parent.Namespace(), "")
		var items []kubewasm.Object
		for _, obj := range stored {
			if obj.IsControlledBy(parent) {
				items = append(items, h.Host.Handed(k, obj))
			}
		}
		out[i] = raw(k, items)
	}
	return out
}

// related asks Customize for the parent's rules and reads what they select from the store, as
// the host does (one entry per rule).
func (h *CompositeHarness) related(parent kubewasm.Object) ([]kubewasm.RawObjects, error) {
	rules, err := h.Customize(parent)
	if err != nil {
		return nil, &kubewasm.Error{Code: kubewasm.CodeOf(err), Message: "customize: " + err.Error()}
	}
	out := make([]kubewasm.RawObjects, len(rules))
	for i, rule := range rules {
		if len(rule.Names) > 0 && rule.LabelSelector != "" {
			return nil, kubewasm.NewError(kubewasm.CodeInvalid, "customize rule %d: names and label-selector together: a rule selects by one", i)
		}
		stored, err := h.Host.list(rule.GVK, rule.Namespace, rule.LabelSelector)
		if err != nil {
			return nil, kubewasm.NewError(kubewasm.CodeInvalid, "customize rule %d: %v", i, err)
		}
		var items []kubewasm.Object
		for _, obj := range stored {
			if len(rule.Names) == 0 || slices.Contains(rule.Names, obj.Name()) {
				items = append(items, h.Host.Handed(rule.GVK, obj))
			}
		}
		out[i] = raw(rule.GVK, items)
	}
	return out, nil
}

// byKind is objects as one entry per kind, in the order the kinds first appear.
func byKind(objects []kubewasm.Object) []kubewasm.RawObjects {
	var kinds []kubewasm.GVK
	for _, obj := range objects {
		if !slices.ContainsFunc(kinds, func(k kubewasm.GVK) bool { return sameKind(k, obj.GVK()) }) {
			kinds = append(kinds, obj.GVK())
		}
	}
	out := make([]kubewasm.RawObjects, len(kinds))
	for i, k := range kinds {
		var items []kubewasm.Object
		for _, obj := range objects {
			if sameKind(obj.GVK(), k) {
				items = append(items, obj)
			}
		}
		out[i] = raw(k, items)
	}
	return out
}

// raw is objects of a kind as the host hands them: sorted by namespace and name, JSON text.
func raw(gvk kubewasm.GVK, objects []kubewasm.Object) kubewasm.RawObjects {
	objects = slices.Clone(objects)
	sortObjects(objects)
	items := make([]string, len(objects))
	for i, obj := range objects {
		items[i] = text(obj)
	}
	return kubewasm.RawObjects{GVK: gvk, Items: items}
}
