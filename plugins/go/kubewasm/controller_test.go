package kubewasm

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func init() { stderr = io.Discard }

// recordingHost records what a controller does; every call answers from its fields.
type recordingHost struct {
	stored  map[string]string
	list    []string
	logs    []string
	events  []Event
	deleted []string
	applied []string
	// inCluster are the names InCluster was given; reads and writes there come here too.
	inCluster []string
}

func (h *recordingHost) CacheGet(g GVK, ns, name string) (string, bool, error) {
	text, ok := h.stored[ns+"/"+name]
	return text, ok, nil
}
func (h *recordingHost) CacheList(GVK, string, string) ([]string, error) { return h.list, nil }
func (h *recordingHost) CacheListControlled(_ GVK, _ string, owner string) ([]string, error) {
	var controlled []string
	for _, text := range h.list {
		obj, err := ParseObject([]byte(text))
		if err != nil {
			return nil, err
		}
		if r, ok := obj.ControllerRef(); ok && r.UID == owner {
			controlled = append(controlled, text)
		}
	}
	return controlled, nil
}
func (h *recordingHost) Apply(obj string, force bool) (string, error) {
	h.applied = append(h.applied, obj)
	if !force {
		return "", NewError(CodeConflict, "field clash")
	}
	return obj, nil
}
func (h *recordingHost) ApplyStatus(obj string, force bool) (string, error) { return obj, nil }
func (h *recordingHost) Create(obj string) (string, error)                  { return obj, nil }
func (h *recordingHost) Update(obj string) (string, error)                  { return obj, nil }
func (h *recordingHost) UpdateStatus(obj string) (string, error)            { return obj, nil }
func (h *recordingHost) Patch(GVK, string, string, PatchType, string) (string, error) {
	return `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`, nil
}
func (h *recordingHost) Delete(g GVK, ns, name string) error {
	h.deleted = append(h.deleted, g.Kind+" "+ns+"/"+name)
	return nil
}
func (h *recordingHost) PublishEvent(e Event) error { h.events = append(h.events, e); return nil }
func (h *recordingHost) Cluster() string            { return "" }
func (h *recordingHost) Clusters() []Cluster        { return nil }
func (h *recordingHost) InCluster(name string) ClusterHost {
	h.inCluster = append(h.inCluster, name)
	return h
}
func (h *recordingHost) Log(level LogLevel, message string, fields []LogField) {
	parts := []string{level.String(), message}
	for _, f := range fields {
		parts = append(parts, f.Key+"="+f.Value)
	}
	h.logs = append(h.logs, strings.Join(parts, " "))
}

type settings struct {
	Suffix string `json:"suffix"`
	Count  int    `json:"count"`
}

func (s *settings) Default() { s.Suffix = "summary" }

type testController struct {
	s      settings
	panics bool
}

func newTestController(s settings) (*testController, error) {
	if s.Count < 0 {
		return nil, errors.New("count must not be negative")
	}
	return &testController{s: s}, nil
}

func (c *testController) Manifest() *Manifest {
	return NewManifest("test", "0.1.0").Primary(GVK{Version: "v1", Kind: "ConfigMap"}).Owns(deployment).Permission(deployment, VerbDelete)
}

func (c *testController) Reconcile(ctx *Context, obj Object) (Result, error) {
	switch obj.Name() {
	case "panic":
		panic("oh no")
	case "conflict":
		_, err := ctx.Apply(obj, NoForce())
		return Result{}, err
	case "requeue":
		return Result{RequeueAfter: 30 * time.Second}, nil
	case "plain-error":
		return Result{}, errors.New("something broke")
	}
	ctx.Info("reconciled", "name", obj.Name(), "suffix", c.s.Suffix, "odd")
	return Result{}, nil
}

func (c *testController) MapRelated(ctx *Context, g GVK, obj Object) ([]ObjectKey, error) {
	if obj.Name() == "bad" {
		return nil, errors.New("cannot map")
	}
	return []ObjectKey{{Namespace: obj.Namespace(), Name: "owner"}}, nil
}

func TestSettingsDecodeStrictlyOverDefaults(t *testing.T) {
	for text, want := range map[string]settings{"": {"summary", 0}, "{}": {"summary", 0}, "null": {"summary", 0}, `{"count": 2}`: {"summary", 2}, `{"suffix": "x"}`: {"x", 0}} {
		got, err := DecodeSettings[settings](text)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v", text, got, err)
		}
	}
	for text, wantErr := range map[string]string{`{"cuont": 1}`: `settings: unknown field "cuont"`, `{"count": "two"}`: "settings: cannot unmarshal", `{"count": 1.5}`: "settings: cannot unmarshal", `[1]`: "settings: cannot unmarshal"} {
		if _, err := DecodeSettings[settings](text); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: %v, want %q", text, err, wantErr)
		}
	}
	if _, err := DecodeSettings[NoSettings](`{"x": 1}`); err == nil {
		t.Error("NoSettings refuses settings")
	}
}

func TestDescribeBuildsTheControllerOrRefuses(t *testing.T) {
	p := NewPlugin(newTestController, &recordingHost{})
	if _, err := p.Call(MethodReconcile, ObjectKey{}, `{}`, 0); err == nil || !strings.Contains(err.Error(), "before describe") {
		t.Errorf("call before describe: %v", err)
	}
	if _, err := p.Describe(`{"count": -1}`); err == nil || err.Error() != "count must not be negative" {
		t.Errorf("refusal: %v", err)
	}
	spec, err := p.Describe(`{"count": 1}`)
	if err != nil || spec.Name != "test" {
		t.Fatalf("%+v %v", spec, err)
	}
	if p.Controller().(*testController).s.Count != 1 {
		t.Error("settings reach the controller")
	}
}

// viewsController is testController reading its Deployments metadata-only.
type viewsController struct{ testController }

func (c *viewsController) Manifest() *Manifest {
	return c.testController.Manifest().MetadataOnly(deployment)
}

func TestTheViewsExportAnswersTheManifestsMetadataOnlyKinds(t *testing.T) {
	p := NewPlugin(func(s settings) (*viewsController, error) { return &viewsController{testController{s: s}}, nil }, &recordingHost{})
	if got := p.MetadataOnly(); len(got) != 0 {
		t.Errorf("none before describe: %v", got)
	}
	if _, err := p.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	if got := p.MetadataOnly(); !slices.Equal(got, []GVK{deployment}) {
		t.Errorf("%v", got)
	}
	plain := NewPlugin(newTestController, &recordingHost{})
	if _, err := plain.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	if got := plain.MetadataOnly(); len(got) != 0 {
		t.Errorf("none declared, every kind handed whole: %v", got)
	}
}

// fleetController is testController serving the prod members too, and reaching every member.
type fleetController struct{ testController }

func (c *fleetController) Manifest() *Manifest {
	return c.testController.Manifest().ServeLocal(false).ServeMembers(MembersMatching("env=prod")).ReachMembers(AllMembers())
}

func TestTheClustersExportAnswersTheManifestsScope(t *testing.T) {
	p := NewPlugin(func(s settings) (*fleetController, error) { return &fleetController{testController{s: s}}, nil }, &recordingHost{})
	if _, err := p.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	want := ClusterScope{ServeLocal: false, Serve: MembersMatching("env=prod"), Reach: AllMembers()}
	if got := p.ClusterScope(); got != want {
		t.Errorf("%+v", got)
	}
	plain := NewPlugin(newTestController, &recordingHost{})
	if _, err := plain.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	if got := plain.ClusterScope(); got != (ClusterScope{ServeLocal: true}) {
		t.Errorf("none declared, the host's own cluster only: %+v", got)
	}
}

func TestCallsReturnWhatTheHostGets(t *testing.T) {
	host := &recordingHost{}
	p := NewPlugin(newTestController, host)
	if _, err := p.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	obj := func(name string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default","uid":"u1"}}`
	}
	if r, err := p.Call(MethodReconcile, ObjectKey{"default", "a"}, obj("a"), 0); err != nil || r != (Result{}) {
		t.Errorf("%v %v", r, err)
	}
	if host.logs[0] != "info reconciled name=a suffix=summary odd=(missing)" {
		t.Errorf("log %q", host.logs[0])
	}
	if r, _ := p.Call(MethodReconcile, ObjectKey{}, obj("requeue"), 0); r.RequeueAfter != 30*time.Second {
		t.Errorf("requeue %v", r)
	}
	_, err := p.Call(MethodReconcile, ObjectKey{}, obj("conflict"), 0)
	if e := err.(*Error); e.Code != CodeConflict || e.Message != "field clash" {
		t.Errorf("conflict: %+v", e)
	}
	_, err = p.Call(MethodReconcile, ObjectKey{}, obj("plain-error"), 0)
	if e := err.(*Error); e.Code != CodeOther || e.Message != "something broke" {
		t.Errorf("plain: %+v", e)
	}
	func() {
		defer func() {
			if r := recover(); r != "oh no" {
				t.Errorf("a panic is not an answer: it reaches the export (to trap), got %v", r)
			}
		}()
		r, err := p.Call(MethodReconcile, ObjectKey{}, obj("panic"), 0)
		t.Errorf("a panic returned %v %v", r, err)
	}()
	_, err = p.Call(MethodReconcile, ObjectKey{}, `{not json`, 0)
	if e := err.(*Error); e.Code != CodeInvalid {
		t.Errorf("bad object: %+v", e)
	}
	// Finalize without a Finalizer is done.
	if r, err := p.Call(MethodFinalize, ObjectKey{}, obj("a"), 0); err != nil || r != (Result{}) {
		t.Errorf("finalize %v %v", r, err)
	}
}

func TestReleasedDeletesControlledChildrenByDefault(t *testing.T) {
	host := &recordingHost{list: []string{
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"mine","namespace":"default","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"u1","controller":true}]}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"theirs","namespace":"default","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"b","uid":"u2","controller":true}]}}`,
	}}
	p := NewPlugin(newTestController, host)
	if _, err := p.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	_, err := p.Call(MethodReleased, ObjectKey{"default", "a"}, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default","uid":"u1"}}`, 0)
	if err != nil || len(host.deleted) != 1 || host.deleted[0] != "Deployment default/mine" {
		t.Errorf("%v %v", host.deleted, err)
	}
}

func TestMapRelatedFailuresReachTheExport(t *testing.T) {
	p := NewPlugin(newTestController, &recordingHost{})
	if _, err := p.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	keys, err := p.MapRelated(deployment, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"ns"}}`)
	if err != nil || len(keys) != 1 || keys[0] != (ObjectKey{"ns", "owner"}) {
		t.Errorf("%v %v", keys, err)
	}
	// The export traps on the error (map-related has no error value), never maps to no keys.
	if keys, err := p.MapRelated(deployment, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"bad"}}`); err == nil || err.Error() != "cannot map" {
		t.Errorf("%v %v", keys, err)
	}
	if _, err := p.MapRelated(deployment, `{not json`); CodeOf(err) != CodeInvalid {
		t.Errorf("bad object: %v", err)
	}
}

func TestRequeueDelaysRoundUpToWholeMilliseconds(t *testing.T) {
	for after, want := range map[time.Duration]uint64{2500 * time.Millisecond: 2500, 400 * time.Microsecond: 1, 1001 * time.Microsecond: 2, time.Nanosecond: 1, time.Hour: 3_600_000} {
		if got := requeueMillis(after); got != want {
			t.Errorf("%v: %d, want %d", after, got, want)
		}
	}
}

func TestReturnedErrorsAreCutToWhatTheHostTakes(t *testing.T) {
	long := strings.Repeat("é", 40_000)
	for _, err := range []error{NewError(CodeConflict, "%s", long), fmt.Errorf("wrapped: %w", NewError(CodeConflict, "%s", long)), errors.New(long)} {
		e := asError(err)
		if len(e.Message) > MaxErrorMessage || len(e.Message) < MaxErrorMessage-1 || !utf8.ValidString(e.Message) {
			t.Errorf("%d bytes, valid %v", len(e.Message), utf8.ValidString(e.Message))
		}
	}
	if e := asError(NewError(CodeConflict, "short")); e.Message != "short" || e.Code != CodeConflict {
		t.Errorf("%+v", e)
	}
	p := NewPlugin(func(NoSettings) (*testController, error) { return nil, errors.New(long) }, &recordingHost{})
	if _, err := p.Describe("{}"); err == nil || len(err.Error()) != MaxErrorMessage {
		t.Errorf("describe refusal of %d bytes", len(err.Error()))
	}
}

func TestContextConvenience(t *testing.T) {
	host := &recordingHost{stored: map[string]string{"default/a": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`}}
	ctx := NewContext(host, ObjectKey{"default", "a"}, 3)
	if ctx.Retries() != 3 || ctx.Key().Name != "a" {
		t.Error("key/retries")
	}
	obj, err := ctx.Get(GVK{Version: "v1", Kind: "ConfigMap"}, "default", "a")
	if err != nil || obj.Name() != "a" {
		t.Errorf("%v %v", obj, err)
	}
	if _, err := ctx.Get(GVK{Version: "v1", Kind: "ConfigMap"}, "default", "gone"); !IsNotFound(err) {
		t.Errorf("missing: %v", err)
	}
	var typed struct {
		Data map[string]string `json:"data"`
	}
	if err := ctx.GetInto(GVK{Version: "v1", Kind: "ConfigMap"}, "default", "a", &typed); err != nil || typed.Data["k"] != "v" {
		t.Errorf("%v %v", typed, err)
	}
	host.list = []string{`{"metadata":{"name":"x"}}`, `{"metadata":{"name":"y"}}`}
	var names []struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := ListInto(ctx, GVK{Version: "v1", Kind: "Node"}, &names); err != nil || len(names) != 2 || names[1].Metadata.Name != "y" {
		t.Errorf("%v %v", names, err)
	}
	if err := ctx.Event(obj, Warning, "Bad", "Reconcile", "note"); err != nil || host.events[0].Regarding != (ObjectRef{GVK{Version: "v1", Kind: "ConfigMap"}, "", "a"}) || host.events[0].Type != Warning {
		t.Errorf("%+v %v", host.events, err)
	}
	if _, err := ctx.Apply(map[string]any{"bad": func() {}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("not JSON: %v", err)
	}
	if _, err := ctx.Patch(GVK{Version: "v1", Kind: "Node"}, "", "n", MergePatch, []byte(`{"a":1}`)); err != nil {
		t.Error(err)
	}
}

// projectingController is testController reading only the spec of its Deployments.
type projectingController struct{ testController }

func (c *projectingController) Manifest() *Manifest {
	return c.testController.Manifest().ReadsFields(deployment, "spec.replicas").ReadsFields(deployment, "status")
}

func TestTheProjectionsExportAnswersTheFieldsReadAsPaths(t *testing.T) {
	p := NewPlugin(func(s settings) (*projectingController, error) {
		return &projectingController{testController{s: s}}, nil
	}, &recordingHost{})
	if _, err := p.Describe("{}"); err != nil {
		t.Fatal(err)
	}
	want := []FieldsRead{{GVK: deployment, Fields: []string{"spec.replicas", "status"}}}
	if got := p.ReadsFields(); !reflect.DeepEqual(got, want) {
		t.Errorf("%v", got)
	}
}
