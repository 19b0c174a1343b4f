package kubewasm

import (
	"fmt"
	"strings"
	"testing"
)

// noCalls is a Host that fails the test when it is reached: every refusal here comes first.
type noCalls struct{ t *testing.T }

func (h noCalls) called(name string) { h.t.Fatalf("the host was called (%s)", name) }

func (h noCalls) CacheGet(GVK, string, string) (string, bool, error) {
	h.called("CacheGet")
	return "", false, nil
}
func (h noCalls) CacheList(GVK, string, string) ([]string, error) {
	h.called("CacheList")
	return nil, nil
}
func (h noCalls) CacheListControlled(GVK, string, string) ([]string, error) {
	h.called("CacheListControlled")
	return nil, nil
}
func (h noCalls) Apply(string, bool) (string, error)       { h.called("Apply"); return "", nil }
func (h noCalls) ApplyStatus(string, bool) (string, error) { h.called("ApplyStatus"); return "", nil }
func (h noCalls) Create(string) (string, error)            { h.called("Create"); return "", nil }
func (h noCalls) Update(string) (string, error)            { h.called("Update"); return "", nil }
func (h noCalls) UpdateStatus(string) (string, error)      { h.called("UpdateStatus"); return "", nil }
func (h noCalls) Patch(GVK, string, string, PatchType, string) (string, error) {
	h.called("Patch")
	return "", nil
}
func (h noCalls) Delete(GVK, string, string) error { h.called("Delete"); return nil }
func (h noCalls) PublishEvent(Event) error         { h.called("PublishEvent"); return nil }
func (h noCalls) Log(LogLevel, string, []LogField) {}
func (h noCalls) Cluster() string                  { h.called("Cluster"); return "" }
func (h noCalls) Clusters() []Cluster              { h.called("Clusters"); return nil }

// InCluster makes no host call (the component's builds the fleet calls' cluster argument): the
// calls into the cluster are what fail the test.
func (h noCalls) InCluster(string) ClusterHost { return h }

func refused(t *testing.T, err error, want string) {
	t.Helper()
	if e, ok := err.(*Error); !ok || e.Code != CodeInvalid || e.Message != want {
		t.Errorf("%v, want invalid %q", err, want)
	}
}

var configMaps = GVK{Version: "v1", Kind: "ConfigMap"}

func TestOverLongArgumentsAreRefusedBeforeTheHostIsCalled(t *testing.T) {
	ctx := NewContext(noCalls{t}, ObjectKey{}, 0)
	long := strings.Repeat("a", 254)
	_, err := ctx.Get(configMaps, "ns", long)
	refused(t, err, "name is 254 bytes; at most 253")
	_, err = ctx.Get(configMaps, strings.Repeat("n", 64), "a")
	refused(t, err, "namespace is 64 bytes; at most 63")
	_, err = ctx.Get(configMaps, "ns", strings.Repeat("é", 127))
	refused(t, err, "name is 254 bytes; at most 253")
	refused(t, ctx.GetInto(configMaps, "ns", long, &struct{}{}), "name is 254 bytes; at most 253")
	refused(t, ctx.Delete(configMaps, "ns", long), "name is 254 bytes; at most 253")
	_, err = ctx.List(GVK{Group: strings.Repeat("g", 254), Version: "v1", Kind: "K"})
	refused(t, err, "group is 254 bytes; at most 253")
	_, err = ctx.List(GVK{Version: strings.Repeat("v", 64), Kind: "K"})
	refused(t, err, "version is 64 bytes; at most 63")
	_, err = ctx.List(GVK{Version: "v1", Kind: strings.Repeat("K", 64)})
	refused(t, err, "kind is 64 bytes; at most 63")
	_, err = ctx.List(configMaps, InNamespace(strings.Repeat("n", 64)))
	refused(t, err, "namespace is 64 bytes; at most 63")
	_, err = ctx.List(configMaps, MatchingLabels(strings.Repeat("a", 4097)))
	refused(t, err, "label selector is 4097 bytes; at most 4096")
	var nodes []struct{}
	refused(t, ListInto(ctx, configMaps, &nodes, MatchingLabels(strings.Repeat("a", 4097))), "label selector is 4097 bytes; at most 4096")
	_, err = ctx.ListControlled(configMaps, strings.Repeat("u", 254))
	refused(t, err, "owner is 254 bytes; at most 253")
	_, err = ctx.ListControlled(configMaps, "u", InNamespace(strings.Repeat("n", 64)))
	refused(t, err, "namespace is 64 bytes; at most 63")
	_, err = ctx.ListControlled(GVK{Version: "v1", Kind: strings.Repeat("K", 64)}, "u")
	refused(t, err, "kind is 64 bytes; at most 63")
	refused(t, ListControlledInto(ctx, configMaps, strings.Repeat("u", 254), &nodes), "owner is 254 bytes; at most 253")
	_, err = ctx.ListControlled(configMaps, "u", MatchingLabels("app=web"))
	refused(t, err, "ListControlled takes no label selector (only InNamespace)")
}

func TestOverLongObjectsPatchesAndEventTextsAreRefusedBeforeTheHostIsCalled(t *testing.T) {
	ctx := NewContext(noCalls{t}, ObjectKey{}, 0)
	big := NewObject(configMaps, "ns", "a")
	big["data"] = map[string]any{"k": strings.Repeat("x", 3<<20)}
	text, _ := marshal(big)
	want := fmt.Sprintf("object is %d bytes; at most 3145728", len(text))
	for name, write := range map[string]func(any) (Object, error){"apply": func(o any) (Object, error) { return ctx.Apply(o) }, "create": ctx.Create, "update": ctx.Update, "update status": ctx.UpdateStatus} {
		_, err := write(big)
		if e, ok := err.(*Error); !ok || e.Message != want {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := ctx.ApplyStatus(string(text))
	refused(t, err, want)
	_, err = ctx.Patch(configMaps, "ns", "a", MergePatch, []byte(strings.Repeat("x", 3<<20)+"é"))
	refused(t, err, "patch body is 3145730 bytes; at most 3145728")
	_, err = ctx.Patch(configMaps, "ns", strings.Repeat("a", 254), MergePatch, "{}")
	refused(t, err, "name is 254 bytes; at most 253")
	cm := NewObject(configMaps, "ns", "a")
	refused(t, ctx.Event(cm, Normal, "", "Reconcile", ""), "event reason must not be empty")
	refused(t, ctx.Event(cm, Normal, "Made", "", ""), "event action must not be empty")
	refused(t, ctx.Event(cm, Normal, strings.Repeat("R", 129), "A", ""), "event reason is 129 bytes; at most 128")
	refused(t, ctx.Event(cm, Normal, "R", strings.Repeat("A", 129), ""), "event action is 129 bytes; at most 128")
	refused(t, ctx.Event(cm, Normal, "R", "A", strings.Repeat("n", 1025)), "event note is 1025 bytes; at most 1024")
	refused(t, ctx.Event(NewObject(configMaps, "ns", strings.Repeat("a", 254)), Normal, "R", "A", ""), "name is 254 bytes; at most 253")
}

func TestAnOverLongClusterIsRefusedBeforeTheHostIsCalled(t *testing.T) {
	want := "cluster is 254 bytes; at most 253"
	in := NewContext(noCalls{t}, ObjectKey{}, 0).InCluster(strings.Repeat("c", 254))
	_, err := in.Get(configMaps, "ns", "a")
	refused(t, err, want)
	refused(t, in.GetInto(configMaps, "ns", "a", &struct{}{}), want)
	_, err = in.List(configMaps)
	refused(t, err, want)
	var typed []struct{}
	refused(t, ListInto(in, configMaps, &typed), want)
	cm := NewObject(configMaps, "ns", "a")
	for name, write := range map[string]func(any) (Object, error){
		"apply":        func(o any) (Object, error) { return in.Apply(o) },
		"apply status": func(o any) (Object, error) { return in.ApplyStatus(o) },
		"create":       in.Create, "update": in.Update, "update status": in.UpdateStatus,
	} {
		_, err := write(cm)
		if e, ok := err.(*Error); !ok || e.Code != CodeInvalid || e.Message != want {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err = in.Patch(configMaps, "ns", "a", MergePatch, "{}")
	refused(t, err, want)
	refused(t, in.Delete(configMaps, "ns", "a"), want)
	// The cluster is checked first, as the host reads it first.
	_, err = in.Get(configMaps, "ns", strings.Repeat("a", 254))
	refused(t, err, want)
	// And in a cluster of a fine name, the other bounds hold as in the call's own.
	_, err = NewContext(noCalls{t}, ObjectKey{}, 0).InCluster("eu").Get(configMaps, "ns", strings.Repeat("a", 254))
	refused(t, err, "name is 254 bytes; at most 253")
}

func TestListControlledIsRefusedInANamedCluster(t *testing.T) {
	in := NewContext(noCalls{t}, ObjectKey{}, 0).InCluster("eu")
	_, err := in.ListControlled(configMaps, "uid")
	refused(t, err, "ListControlled reads the call's own cluster only: list by label in another")
	owner := NewObject(configMaps, "ns", "a")
	owner.SetField("uid", "metadata", "uid")
	refused(t, in.DeleteControlled(owner, []OwnedKind{{GVK: configMaps, MayDelete: true}}), "ListControlled reads the call's own cluster only: list by label in another")
}

func TestValuesAtTheBoundsReachTheHost(t *testing.T) {
	host := &recordingHost{}
	ctx := NewContext(host, ObjectKey{}, 0)
	g := GVK{Group: strings.Repeat("g", 253), Version: strings.Repeat("v", 63), Kind: strings.Repeat("K", 63)}
	if _, err := ctx.Get(g, strings.Repeat("n", 63), strings.Repeat("a", 253)); !IsNotFound(err) {
		t.Errorf("get: %v", err)
	}
	if _, err := ctx.ListControlled(g, strings.Repeat("u", 253), InNamespace(strings.Repeat("n", 63))); err != nil {
		t.Errorf("list controlled: %v", err)
	}
	if err := ctx.Event(NewObject(configMaps, "ns", strings.Repeat("a", 253)), Normal, strings.Repeat("R", 128), strings.Repeat("A", 128), strings.Repeat("n", 1024)); err != nil || len(host.events) != 1 {
		t.Errorf("event: %v", err)
	}
	cluster := strings.Repeat("c", 253)
	if err := ctx.InCluster(cluster).Delete(configMaps, "ns", "a"); err != nil || len(host.inCluster) != 1 || host.inCluster[0] != cluster || len(host.deleted) != 1 {
		t.Errorf("in cluster: %v %d %v", err, len(host.inCluster), host.deleted)
	}
}

func TestCutKeepsWholeCharacters(t *testing.T) {
	if cut("short") != "short" || len(cut(strings.Repeat("x", 70_000))) != MaxErrorMessage {
		t.Error("ASCII")
	}
	if got := cut(strings.Repeat("€", 30_000)); got != strings.Repeat("€", 21_845) {
		t.Errorf("%d bytes", len(got))
	}
}
