package kubewasm

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	configMap = GVK{Version: "v1", Kind: "ConfigMap"}
	secret    = GVK{Version: "v1", Kind: "Secret"}
)

// testComposite makes one ConfigMap per parent (a Foo), its data the parent's spec.data, and
// reports how many it has; some parent names make it misbehave.
type testComposite struct{ s settings }

func newTestComposite(s settings) (*testComposite, error) {
	if s.Count < 0 {
		return nil, errors.New("count must not be negative")
	}
	return &testComposite{s: s}, nil
}

func (c *testComposite) Manifest() *Manifest {
	return NewManifest("composite", "0.1.0").
		Primary(fooKind).
		Child(configMap, InPlace).
		Child(deployment, Recreate).
		Owns(GVK{Version: "v1", Kind: "Service"}).
		ChildSelector(ParentSpecSelector).
		Finalizer("example.com/cleanup")
}

func (c *testComposite) Sync(ctx *Context, req *SyncRequest) (*SyncResponse, error) {
	switch req.Parent.Name() {
	case "panic":
		panic("oh no")
	case "conflict":
		return nil, NewError(CodeConflict, "try again")
	case "plain-error":
		return nil, errors.New("something broke")
	case "nil":
		return nil, nil
	case "bad-child":
		return &SyncResponse{Children: []any{map[string]any{"f": func() {}}}}, nil
	case "list-child":
		return &SyncResponse{Children: []any{`[1]`}}, nil
	case "bad-status":
		return &SyncResponse{Status: []int{1}}, nil
	case "write":
		_, err := ctx.Apply(NewObject(configMap, "ns", "x"))
		return nil, err
	}
	ctx.Info("syncing", "parent", req.Parent.Name(), "key", ctx.Key())
	child := NewObject(configMap, "", req.Parent.Name()+"-"+c.s.Suffix)
	child["data"] = req.Parent.Map("spec", "data")
	secrets := []string{}
	for _, s := range req.Related(secret) {
		secrets = append(secrets, s.Name())
	}
	return &SyncResponse{
		Status:      map[string]any{"configMaps": len(req.Children(configMap)), "deployments": len(req.Children(deployment)), "secrets": strings.Join(secrets, ",")},
		Children:    []any{child},
		ResyncAfter: 1500 * time.Microsecond,
	}, nil
}

func (c *testComposite) Customize(ctx *Context, parent Object) ([]RelatedRule, error) {
	if parent.Name() == "bad-customize" {
		return nil, NewError(CodeInvalid, "no rules for you")
	}
	return []RelatedRule{RelatedNamed(secret, parent.Namespace(), "a", "b"), RelatedSelected(configMap, "", "app=web")}, nil
}

// plainComposite has nothing but Sync.
type plainComposite struct{}

func (plainComposite) Manifest() *Manifest { return NewManifest("plain", "1").Primary(fooKind) }
func (plainComposite) Sync(*Context, *SyncRequest) (*SyncResponse, error) {
	return &SyncResponse{}, nil
}

func TestChildAddsAnOwnsKindOnceAndARule(t *testing.T) {
	spec, err := NewManifest("a", "1").Primary(fooKind).
		Owns(configMap).
		Child(configMap, OnDelete).
		Child(deployment, InPlace).
		Child(configMap, Recreate).
		Spec()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.Owns, []GVK{configMap, deployment}) {
		t.Errorf("owns %v", spec.Owns)
	}
	want := &Composition{Children: []ChildRule{{deployment, InPlace}, {configMap, Recreate}}, Selector: GeneratedSelector}
	if spec.Composition == nil || !slices.Equal(spec.Composition.Children, want.Children) || spec.Composition.Selector != want.Selector {
		t.Errorf("composition %+v", spec.Composition)
	}
	spec, _ = NewManifest("a", "1").Primary(fooKind).ChildSelector(ParentSpecSelector).Spec()
	if spec.Composition == nil || len(spec.Composition.Children) != 0 || spec.Composition.Selector != ParentSpecSelector || len(spec.Owns) != 0 {
		t.Errorf("selector only: %+v", spec.Composition)
	}
	if spec, _ := NewManifest("a", "1").Primary(fooKind).Owns(configMap).Spec(); spec.Composition != nil {
		t.Errorf("none declared: %+v", spec.Composition)
	}
	for s, name := range map[UpdateStrategy]string{OnDelete: "on-delete", Recreate: "recreate", InPlace: "in-place"} {
		if s.String() != name {
			t.Errorf("%d is %s", s, s)
		}
	}
	if GeneratedSelector.String() != "generated" || ParentSpecSelector.String() != "parent-spec-selector" {
		t.Error("selector names")
	}
}

func TestDescribeAnswersTheCompositionOfADeclarativeControllerOnly(t *testing.T) {
	p := NewCompositePlugin(newTestComposite, &recordingHost{})
	if p.Composition() != nil || !p.Declarative() {
		t.Error("nothing before describe")
	}
	if _, err := p.Describe(`{"count": -1}`); err == nil || err.Error() != "count must not be negative" {
		t.Errorf("refusal: %v", err)
	}
	spec, err := p.Describe("{}")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.Owns, []GVK{configMap, deployment, {Version: "v1", Kind: "Service"}}) {
		t.Errorf("owns %v", spec.Owns)
	}
	got := p.Composition()
	if got == nil || !slices.Equal(got.Children, []ChildRule{{configMap, InPlace}, {deployment, Recreate}}) || got.Selector != ParentSpecSelector {
		t.Errorf("%+v", got)
	}
	if p.Composite() == nil || p.Controller() != nil {
		t.Error("a Composite was built")
	}
	// A Composite that declares no child kind still answers a composition.
	empty := NewCompositePlugin(func(NoSettings) (plainComposite, error) { return plainComposite{}, nil }, &recordingHost{})
	if _, err := empty.Describe("{}"); err != nil || empty.Composition() == nil || len(empty.Composition().Children) != 0 {
		t.Errorf("%+v %v", empty.Composition(), err)
	}
	// A Controller answers none, and may not declare children.
	plain := NewPlugin(newTestController, &recordingHost{})
	if _, err := plain.Describe("{}"); err != nil || plain.Composition() != nil || plain.Declarative() {
		t.Errorf("%+v %v", plain.Composition(), err)
	}
	children := NewPlugin(func(NoSettings) (*childrenController, error) { return &childrenController{}, nil }, &recordingHost{})
	if _, err := children.Describe("{}"); err == nil || !strings.Contains(err.Error(), "ExportComposite") {
		t.Errorf("a Controller with Child: %v", err)
	}
}

// childrenController is a Controller that declares a child kind, by mistake.
type childrenController struct{ testController }

func (*childrenController) Manifest() *Manifest {
	return NewManifest("a", "1").Primary(fooKind).Child(configMap, InPlace)
}

const fooJSON = `{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"NAME","namespace":"ns","uid":"u1"},"spec":{"data":{"k":"v"}}}`

func parentJSON(name string) string { return strings.Replace(fooJSON, "NAME", name, 1) }

func describedComposite(t *testing.T, host Host) *Plugin {
	t.Helper()
	p := NewCompositePlugin(newTestComposite, host)
	if _, err := p.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSyncHandsChildrenAndRelatedByKindAndAnswersTheDesiredState(t *testing.T) {
	host := &recordingHost{}
	p := describedComposite(t, host)
	request := RawSyncRequest{
		Parent: parentJSON("a"),
		Children: []RawObjects{
			{GVK: configMap, Items: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-summary","namespace":"ns"}}`}},
			{GVK: deployment, Items: []string{}},
			{GVK: GVK{Version: "v1", Kind: "Service"}},
		},
		Related: []RawObjects{
			{GVK: secret, Items: []string{`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}`}},
			{GVK: configMap},
			// Another rule of the same kind, another version: Related(kind) has both.
			{GVK: GVK{Version: "v2", Kind: "Secret"}, Items: []string{`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b"}}`}},
		},
	}
	got, err := p.CallComposite(MethodSync, request)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != `{"configMaps":1,"deployments":0,"secrets":"a,b"}` {
		t.Errorf("status %s", got.Status)
	}
	if len(got.Children) != 1 || got.Children[0] != `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"a-summary"}}` {
		t.Errorf("children %v", got.Children)
	}
	if got.ResyncAfter != 2 || got.Finalized {
		t.Errorf("resync %d finalized %v", got.ResyncAfter, got.Finalized)
	}
	if host.logs[0] != "info syncing parent=a key=ns/a" {
		t.Errorf("the context is the parent's: %q", host.logs[0])
	}
	// Parse failures are invalid.
	if _, err := p.CallComposite(MethodSync, RawSyncRequest{Parent: `{not json`}); CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), "the parent does not parse") {
		t.Errorf("bad parent: %v", err)
	}
	bad := RawSyncRequest{Parent: parentJSON("a"), Children: []RawObjects{{GVK: configMap, Items: []string{`[]`}}}}
	if _, err := p.CallComposite(MethodSync, bad); CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), "a ConfigMap child does not parse") {
		t.Errorf("bad child: %v", err)
	}
}

func TestSyncRequestAccessors(t *testing.T) {
	cm := NewObject(configMap, "ns", "a")
	req := NewSyncRequest(NewObject(fooKind, "ns", "p"), []Objects{{GVK: configMap, Items: []Object{cm}}, {GVK: deployment}}, nil, true)
	if got := req.Children(GVK{Version: "v2", Kind: "ConfigMap"}); len(got) != 1 || got[0].Name() != "a" {
		t.Errorf("any version of the kind: %v", got)
	}
	if req.Children(deployment) != nil || req.Children(secret) != nil || req.Related(secret) != nil || !req.Finalizing {
		t.Error("nil when none")
	}
}

func TestSyncFailuresAreErrorValuesAndPanicsAreNot(t *testing.T) {
	p := describedComposite(t, &recordingHost{})
	call := func(name string) error {
		_, err := p.CallComposite(MethodSync, RawSyncRequest{Parent: parentJSON(name)})
		return err
	}
	if e := call("conflict").(*Error); e.Code != CodeConflict || e.Message != "try again" {
		t.Errorf("conflict: %+v", e)
	}
	if e := call("plain-error").(*Error); e.Code != CodeOther || e.Message != "something broke" {
		t.Errorf("plain: %+v", e)
	}
	// An answer that is not one is a bug: it panics (to trap), as in every SDK.
	for name, want := range map[string]string{
		"nil":        "neither a response nor an error",
		"bad-child":  "children[0]: json: unsupported type",
		"list-child": "children[0]: not a JSON object",
		"bad-status": "the status: not a JSON object",
	} {
		func() {
			defer func() {
				if r := recover(); !strings.Contains(fmt.Sprint(r), want) {
					t.Errorf("%s: panicked with %v, want %q", name, r, want)
				}
			}()
			err := call(name)
			t.Errorf("%s: returned %v instead of panicking", name, err)
		}()
	}
	func() {
		defer func() {
			if r := recover(); r != "oh no" {
				t.Errorf("a panic reaches the export (to trap), got %v", r)
			}
		}()
		err := call("panic")
		t.Errorf("a panic returned %v", err)
	}()
	if _, err := NewCompositePlugin(newTestComposite, &recordingHost{}).CallComposite(MethodSync, RawSyncRequest{Parent: parentJSON("a")}); err == nil || !strings.Contains(err.Error(), "before describe") {
		t.Errorf("before describe: %v", err)
	}
}

func TestFinalizeDefaultsToFinalized(t *testing.T) {
	p := NewCompositePlugin(func(NoSettings) (plainComposite, error) { return plainComposite{}, nil }, &recordingHost{})
	if _, err := p.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	got, err := p.CallComposite(MethodFinalize, RawSyncRequest{Parent: parentJSON("a"), Finalizing: true})
	if err != nil || !got.Finalized || got.Status != "" || len(got.Children) != 0 || got.ResyncAfter != 0 {
		t.Errorf("%+v %v", got, err)
	}
	if rules, err := p.Customize(parentJSON("a")); err != nil || rules == nil || len(rules) != 0 {
		t.Errorf("no Customizer, no rules: %v %v", rules, err)
	}
	if _, err := p.CallComposite("reconcile", RawSyncRequest{Parent: parentJSON("a")}); err == nil {
		t.Error("unknown method")
	}
}

func TestResyncAfterRoundsUpToWholeMillisecondsAndSaturates(t *testing.T) {
	for after, want := range map[time.Duration]uint64{0: 0, -time.Second: 0, time.Nanosecond: 1, 400 * time.Microsecond: 1, time.Second: 1000, time.Second + time.Nanosecond: 1001, math.MaxInt64: math.MaxInt64/uint64(time.Millisecond) + 1} {
		if got := encodeResponse(&SyncResponse{ResyncAfter: after}, nil); got.ResyncAfter != want {
			t.Errorf("%v: %d, want %d", after, got.ResyncAfter, want)
		}
	}
}

func TestAnswersTakeObjectsStructsAndJSONText(t *testing.T) {
	type status struct {
		Ready bool `json:"ready"`
	}
	got := encodeResponse(&SyncResponse{
		Status: status{Ready: true},
		Children: []any{Object{"kind": "A"}, `{"kind": "B"}`, []byte(` {"kind":"C"}`), struct {
			Kind string `json:"kind"`
		}{"D"}},
	}, nil)
	if got.Status != `{"ready":true}` || !slices.Equal(got.Children, []string{`{"kind":"A"}`, `{"kind": "B"}`, ` {"kind":"C"}`, `{"kind":"D"}`}) {
		t.Errorf("%+v", got)
	}
	for _, none := range []any{nil, Object(nil), map[string]any(nil), "null"} {
		if got := encodeResponse(&SyncResponse{Status: none}, nil); got.Status != "" {
			t.Errorf("%#v: %+v", none, got)
		}
	}
	defer func() {
		if r := recover(); !strings.Contains(fmt.Sprint(r), "children[0]") {
			t.Errorf("a null child: panicked with %v", r)
		}
	}()
	encodeResponse(&SyncResponse{Children: []any{Object(nil)}}, nil)
	t.Error("a null child was encoded")
}

func TestCustomizeAnswersRulesOrAnError(t *testing.T) {
	p := describedComposite(t, &recordingHost{})
	rules, err := p.Customize(parentJSON("a"))
	want := []RelatedRule{{GVK: secret, Namespace: "ns", Names: []string{"a", "b"}}, {GVK: configMap, LabelSelector: "app=web"}}
	if err != nil || len(rules) != 2 || !slices.Equal(rules[0].Names, want[0].Names) || rules[0].Namespace != "ns" || rules[1].LabelSelector != "app=web" || rules[1].GVK != configMap {
		t.Errorf("%+v %v", rules, err)
	}
	if _, err := p.Customize(parentJSON("bad-customize")); CodeOf(err) != CodeInvalid || err.Error() != "no rules for you" {
		t.Errorf("%v", err)
	}
	if _, err := p.Customize(`"a string"`); CodeOf(err) != CodeInvalid {
		t.Errorf("bad parent: %v", err)
	}
}

func TestEachKindOfPluginPanicsOnTheOthersCalls(t *testing.T) {
	composite := describedComposite(t, &recordingHost{})
	plain := NewPlugin(newTestController, &recordingHost{})
	if _, err := plain.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(){
		"reconcile":   func() { _, _ = composite.Call(MethodReconcile, ObjectKey{}, parentJSON("a"), 0) },
		"finalize":    func() { _, _ = composite.Call(MethodFinalize, ObjectKey{}, parentJSON("a"), 0) },
		"released":    func() { _, _ = composite.Call(MethodReleased, ObjectKey{}, parentJSON("a"), 0) },
		"map-related": func() { _, _ = composite.MapRelated(secret, parentJSON("a")) },
		"customize":   func() { _, _ = plain.Customize(parentJSON("a")) },
		"sync":        func() { _, _ = plain.CallComposite(MethodSync, RawSyncRequest{Parent: parentJSON("a")}) },
		"finalize (composite)": func() {
			_, _ = plain.CallComposite(MethodFinalize, RawSyncRequest{Parent: parentJSON("a")})
		},
	} {
		func() {
			defer func() {
				if _, ok := recover().(wrongKind); !ok {
					t.Errorf("%s: no wrong-kind panic", name)
				}
			}()
			call()
		}()
	}
}
