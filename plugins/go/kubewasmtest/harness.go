package kubewasmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// Harness is a controller, described and ready to call against a FakeHost, the way the
// component's exports run it.
type Harness struct {
	// Host is the fake host the controller calls.
	Host *FakeHost
	// Plugin runs the controller (kubewasm.Plugin, as in the component).
	Plugin *kubewasm.Plugin
	// Manifest is what the controller describes to the host; Manifest.Rules,
	// Manifest.MetadataOnly and Manifest.Clusters what its access, views and clusters exports
	// answer (the host then hands those kinds as metadata: FakeHost.Handed; and reaches those
	// members: FakeHost.Scope).
	Manifest kubewasm.ManifestSpec
}

// Option sets up a Harness: WithSettings, WithObjects, WithMember.
type Option func(*options)

type options struct {
	settings string
	objects  []kubewasm.Object
	members  []member
}

type member struct {
	name    string
	labels  map[string]string
	objects []kubewasm.Object
}

// WithSettings gives the controller settings, as NAME.toml would: JSON text (a string or
// []byte), or any value encoding/json makes a JSON object of (a map, the settings struct).
func WithSettings(settings any) Option {
	return func(o *options) {
		switch s := settings.(type) {
		case string:
			o.settings = s
		case []byte:
			o.settings = string(s)
		default:
			text, err := json.Marshal(s)
			if err != nil {
				panic(fmt.Sprintf("kubewasmtest.WithSettings: %v", err))
			}
			o.settings = string(text)
		}
	}
}

// WithObjects puts objects in the fake host's cache.
func WithObjects(objects ...kubewasm.Object) Option {
	return func(o *options) { o.objects = append(o.objects, objects...) }
}

// WithMember engages a member cluster of the fake host (FakeHost.AddMember): its name, its
// labels (what the manifest's ServeMembers and ReachMembers selectors match) and the objects its
// cache holds.
func WithMember(name string, labels map[string]string, objects ...kubewasm.Object) Option {
	return func(o *options) { o.members = append(o.members, member{name, labels, objects}) }
}

// Describe builds the controller as the host would (the constructor given the settings, then
// Manifest); the error is the refusal the host would report.
func Describe[S any, C kubewasm.Controller](newController func(S) (C, error), opts ...Option) (*Harness, error) {
	host, plugin, manifest, err := describe(func(host kubewasm.Host) *kubewasm.Plugin { return kubewasm.NewPlugin(newController, host) }, opts)
	if err != nil {
		return nil, err
	}
	return &Harness{Host: host, Plugin: plugin, Manifest: manifest}, nil
}

func describe(newPlugin func(kubewasm.Host) *kubewasm.Plugin, opts []Option) (*FakeHost, *kubewasm.Plugin, kubewasm.ManifestSpec, error) {
	o := options{settings: "{}"}
	for _, opt := range opts {
		opt(&o)
	}
	host := NewFakeHost(o.objects...)
	for _, m := range o.members {
		host.AddMember(m.name, m.labels, m.objects...)
	}
	plugin := newPlugin(host)
	manifest, err := plugin.Describe(o.settings)
	if err != nil {
		return nil, nil, kubewasm.ManifestSpec{}, err
	}
	host.MetadataOnly = slices.Clone(manifest.MetadataOnly)
	host.ReadsFields = slices.Clone(manifest.ReadsFields)
	scope := manifest.Clusters
	host.Scope = &scope
	return host, plugin, manifest, nil
}

// New is Describe that fails the test when the controller refuses to load.
func New[S any, C kubewasm.Controller](t testing.TB, newController func(S) (C, error), opts ...Option) *Harness {
	t.Helper()
	h, err := Describe(newController, opts...)
	if err != nil {
		t.Fatalf("describe refused: %v", err)
	}
	return h
}

func (h *Harness) call(method kubewasm.Method, obj kubewasm.Object, retries int) (kubewasm.Result, error) {
	text, err := json.Marshal(h.Host.Answered(obj.GVK(), obj))
	if err != nil {
		panic(fmt.Sprintf("kubewasmtest: object is not JSON: %v", err))
	}
	return h.Plugin.Call(method, obj.Key(), string(text), retries)
}

// Reconcile runs Reconcile on obj. The error is what the component would return: an
// *kubewasm.Error with the code and message the host gets. A panic is not recovered: in the
// component it traps.
func (h *Harness) Reconcile(obj kubewasm.Object) (kubewasm.Result, error) {
	return h.call(kubewasm.MethodReconcile, obj, 0)
}

// ReconcileRetry runs Reconcile as the retries-th retry of the key.
func (h *Harness) ReconcileRetry(obj kubewasm.Object, retries int) (kubewasm.Result, error) {
	return h.call(kubewasm.MethodReconcile, obj, retries)
}

// ReconcileKey runs Reconcile on the primary of the key stored in the fake host.
func (h *Harness) ReconcileKey(key kubewasm.ObjectKey) (kubewasm.Result, error) {
	obj, ok := h.Host.Object(h.Manifest.Primary, key.Namespace, key.Name)
	if !ok {
		return kubewasm.Result{}, fmt.Errorf("kubewasmtest: no %s %s in the fake host", h.Manifest.Primary, key)
	}
	return h.Reconcile(obj)
}

// Finalize runs Finalize on obj.
func (h *Harness) Finalize(obj kubewasm.Object) (kubewasm.Result, error) {
	return h.call(kubewasm.MethodFinalize, obj, 0)
}

// Released runs Released on obj, as the host does once a primary stops matching the primary
// selector.
func (h *Harness) Released(obj kubewasm.Object) (kubewasm.Result, error) {
	return h.call(kubewasm.MethodReleased, obj, 0)
}

// MapRelated runs MapRelated on an object of a watched kind, handed as the host hands it
// (FakeHost.Handed). An error is what makes the component trap (map-related has no error value).
func (h *Harness) MapRelated(gvk kubewasm.GVK, obj kubewasm.Object) ([]kubewasm.ObjectKey, error) {
	text, err := json.Marshal(h.Host.Handed(gvk, obj))
	if err != nil {
		panic(fmt.Sprintf("kubewasmtest: object is not JSON: %v", err))
	}
	return h.Plugin.MapRelated(gvk, string(text))
}

// Parse is an Object from JSON text, panicking on bad JSON: for test fixtures.
func Parse(text string) kubewasm.Object {
	obj, err := kubewasm.ParseObject([]byte(text))
	if err != nil {
		panic(fmt.Sprintf("kubewasmtest.Parse: %v", err))
	}
	return obj
}

// Equal is whether two values are the same JSON document: objects from the fake host, Objects
// built with Go numbers, structs, maps. For asserting on what a controller wrote.
func Equal(got, want any) bool {
	return reflect.DeepEqual(jsonValue(got), jsonValue(want))
}

func jsonValue(v any) any {
	text, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("kubewasmtest.Equal: not JSON: %v", err))
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		panic(err)
	}
	return out
}
