package kubewasm

import (
	"errors"
	"strings"
	"testing"

	corev1 "github.com/kubewasm/kubewasm/plugins/go/internal/typedtest/core/v1"
	eventsv1 "github.com/kubewasm/kubewasm/plugins/go/internal/typedtest/events/v1"
)

var (
	coreEvent   = GVK{Version: "v1", Kind: "Event"}
	eventsEvent = GVK{Group: "events.k8s.io", Version: "v1", Kind: "Event"}
)

// typedWriter applies a typed ConfigMap without TypeMeta for every primary.
type typedWriter struct{}

func (typedWriter) Manifest() *Manifest {
	return NewManifest("typed", "0.1.0").Primary(fooKind).Owns(configMap).
		Permission(configMap, VerbPatch)
}

func (typedWriter) Reconcile(ctx *Context, foo Object) (Result, error) {
	_, err := ctx.Apply(&corev1.ConfigMap{
		ObjectMeta: corev1.ObjectMeta{Name: foo.Name(), Namespace: foo.Namespace()},
		Data:       map[string]string{"k": "v"},
	})
	return Result{}, err
}

func TestTypedObjectsWrittenWithoutTypeMetaGetTheDeclaredKind(t *testing.T) {
	host := &recordingHost{}
	p := NewPlugin(func(NoSettings) (typedWriter, error) { return typedWriter{}, nil }, host)
	if _, err := p.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	foo := `{"apiVersion":"example.com/v1","kind":"Foo","metadata":{"name":"a","namespace":"ns"}}`
	if _, err := p.Call(MethodReconcile, ObjectKey{Namespace: "ns", Name: "a"}, foo, 0); err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"}}`
	if len(host.applied) != 1 || host.applied[0] != want {
		t.Errorf("applied %q, want %q", host.applied, want)
	}
}

func TestTheTypesPackageTellsKindsOfOneNameApart(t *testing.T) {
	kinds := declaredKindsOf(ManifestSpec{Primary: fooKind, Owns: []GVK{coreEvent}, Permissions: []Permission{{GVK: eventsEvent}}})
	for _, c := range []struct {
		obj  any
		want string
	}{
		{corev1.Event{ObjectMeta: corev1.ObjectMeta{Name: "e"}}, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"}}`},
		{&eventsv1.Event{ObjectMeta: corev1.ObjectMeta{Name: "e"}}, `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e"}}`},
		// What the author set stays; only what is missing is filled.
		{corev1.Event{TypeMeta: corev1.TypeMeta{APIVersion: "v1beta1"}}, `{"apiVersion":"v1beta1","kind":"Event","metadata":{}}`},
		{corev1.Event{TypeMeta: corev1.TypeMeta{APIVersion: "x/v2", Kind: "Other"}}, `{"apiVersion":"x/v2","kind":"Other","metadata":{}}`},
		// Objects, maps and unnamed structs are encoded as they are.
		{Object{"kind": "Event"}, `{"kind":"Event"}`},
		{struct {
			Kind string `json:"kind"`
		}{"Event"}, `{"kind":"Event"}`},
	} {
		got, err := kinds.encodeObject(c.obj)
		if err != nil || string(got) != c.want {
			t.Errorf("%T: %s %v, want %s", c.obj, got, err, c.want)
		}
	}
}

func TestATypedObjectOfNoDeclaredKindIsRefusedBeforeTheHost(t *testing.T) {
	for _, c := range []struct {
		kinds declaredKinds
		want  string
	}{
		{declaredKindsOf(ManifestSpec{Primary: fooKind}), "declares no kind ConfigMap of version v1: set its TypeMeta"},
		{declaredKindsOf(ManifestSpec{Primary: fooKind, Owns: []GVK{{Version: "v2", Kind: "ConfigMap"}}}), "declares no kind ConfigMap of version v1"},
		{declaredKindsOf(ManifestSpec{Owns: []GVK{{Group: "a.example.com", Version: "v1", Kind: "ConfigMap"}, {Group: "b.example.com", Version: "v1", Kind: "ConfigMap"}}}), "several kinds it could be (ConfigMap.v1.a.example.com, ConfigMap.v1.b.example.com)"},
	} {
		ctx := &Context{host: &recordingHost{}, kinds: c.kinds}
		_, err := ctx.Apply(corev1.ConfigMap{})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "v1.ConfigMap has no apiVersion and kind") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want an invalid error saying %q", err, c.want)
		}
	}
}

func TestVersionLikeIsKubernetesVersionSpelling(t *testing.T) {
	for s, want := range map[string]bool{"v1": true, "v2beta1": true, "v1alpha3": true, "v10": true, "go": false, "v": false, "v1beta": false, "vbeta1": false, "1": false, "v1gamma1": false} {
		if versionLike(s) != want {
			t.Errorf("versionLike(%q) = %v", s, !want)
		}
	}
}
