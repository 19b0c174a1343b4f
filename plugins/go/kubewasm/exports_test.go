package kubewasm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_clusters"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_composite"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_reconciler"
	wit "github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_types"
)

// trapped is what the test glue's fault panics with: the component would trap there.
type trapped struct {
	what   string
	reason any
}

// glue is the component's exports over newPlugin, counting the garbage collector guard's entries
// and exits, with a fault that panics trapped.
type glue struct {
	*exports
	entered, left int
	described     []ManifestSpec
}

func newGlue(newPlugin func() *Plugin) *glue {
	g := &glue{}
	g.exports = &exports{
		newPlugin: func() (*Plugin, error) { return newPlugin(), nil },
		enter:     func() { g.entered++ },
		leave:     func() { g.left++ },
		fault: func(what string, reason any) {
			if t, ok := reason.(trapped); ok {
				panic(t) // a trap already (the component never gets here)
			}
			panic(trapped{what, reason})
		},
		described: func(spec ManifestSpec) { g.described = append(g.described, spec) },
	}
	return g
}

// traps is the trap a call ends in, nil if it returns.
func traps(call func()) (trap *trapped) {
	defer func() {
		if r := recover(); r != nil {
			t, ok := r.(trapped)
			if !ok {
				panic(r)
			}
			trap = &t
		}
	}()
	call()
	return nil
}

func compositeGlue(t *testing.T) *glue {
	t.Helper()
	g := newGlue(func() *Plugin { return NewCompositePlugin(newTestComposite, &recordingHost{}) })
	if r := g.Describe("{}"); r.IsErr() {
		t.Fatal(r.Err())
	}
	return g
}

func plainGlue(t *testing.T) *glue {
	t.Helper()
	g := newGlue(func() *Plugin { return NewPlugin(newTestController, &recordingHost{}) })
	if r := g.Describe("{}"); r.IsErr() {
		t.Fatal(r.Err())
	}
	return g
}

func syncRequest(name string) kubewasm_controller_composite.SyncRequest {
	return kubewasm_controller_composite.SyncRequest{
		Parent:   parentJSON(name),
		Children: []kubewasm_controller_composite.Objects{{Resource: witGVK(configMap), Items: []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`}}, {Resource: witGVK(deployment), Items: []string{}}},
		Related:  []kubewasm_controller_composite.Objects{{Resource: witGVK(secret), Items: []string{`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`}}},
	}
}

func TestDescribeCompositionIsNoneForAControllerAndTheCompositionForAComposite(t *testing.T) {
	plain := plainGlue(t)
	if got := plain.DescribeComposition(); got.IsSome() {
		t.Errorf("a Controller answers none: %+v", got.Some())
	}
	composite := compositeGlue(t)
	got := composite.DescribeComposition()
	if !got.IsSome() {
		t.Fatal("a Composite answers its composition")
	}
	want := []kubewasm_controller_composite.ChildRule{
		{Resource: wit.Gvk{Version: "v1", Kind: "ConfigMap"}, UpdateStrategy: kubewasm_controller_composite.UpdateStrategy_InPlace},
		{Resource: wit.Gvk{Group: "apps", Version: "v1", Kind: "Deployment"}, UpdateStrategy: kubewasm_controller_composite.UpdateStrategy_Recreate},
	}
	if c := got.Some(); !slices.Equal(c.Children, want) || c.Selector != kubewasm_controller_composite.ChildSelector_ParentSpecSelector {
		t.Errorf("%+v", c)
	}
	// Both kinds answer access and views as usual.
	for _, g := range []*glue{plain, composite} {
		_ = g.Rules()
		_ = g.MetadataOnly()
	}
	// Before describe: none, and the calls answer an error (as reconcile does).
	fresh := newGlue(func() *Plugin { return NewCompositePlugin(newTestComposite, &recordingHost{}) })
	if fresh.DescribeComposition().IsSome() {
		t.Error("none before describe")
	}
	if r := fresh.Sync(syncRequest("a")); !r.IsErr() || !strings.Contains(r.Err().Message, "before describe") {
		t.Errorf("sync before describe: %+v", r)
	}
	if r := fresh.Customize(parentJSON("a")); !r.IsErr() {
		t.Error("customize before describe")
	}
	// The manifest the host gets names the child kinds as owns.
	if r := fresh.Describe("{}"); r.IsErr() || len(r.Ok().Owns) != 3 || r.Ok().Owns[1].Kind != "Deployment" {
		t.Errorf("%+v", r)
	}
}

func TestSyncAndFinalizeThroughTheExports(t *testing.T) {
	g := compositeGlue(t)
	r := g.Sync(syncRequest("a"))
	if r.IsErr() {
		t.Fatal(r.Err())
	}
	got := r.Ok()
	if got.Status.SomeOr("") != `{"configMaps":1,"deployments":0,"secrets":"s"}` {
		t.Errorf("status %+v", got.Status)
	}
	if len(got.Children) != 1 || !strings.Contains(got.Children[0], `"name":"a-summary"`) {
		t.Errorf("children %v", got.Children)
	}
	if got.ResyncAfter.SomeOr(0) != 2 || got.Finalized {
		t.Errorf("resync %+v finalized %v", got.ResyncAfter, got.Finalized)
	}
	// An SDK error is an error value, with its code.
	r = g.Sync(syncRequest("conflict"))
	if !r.IsErr() || r.Err() != (wit.Error{Code: uint8(CodeConflict), Message: "try again"}) {
		t.Errorf("conflict: %+v", r)
	}
	if r = g.Sync(syncRequest("plain-error")); !r.IsErr() || r.Err().Code != uint8(CodeOther) {
		t.Errorf("plain: %+v", r)
	}
	// A panic traps.
	if trap := traps(func() { g.Sync(syncRequest("panic")) }); trap == nil || trap.what != "sync panicked" || trap.reason != "oh no" {
		t.Errorf("panic: %+v", trap)
	}
	// Finalize: the Composite has none, so the default: finalized, no children, no status.
	r = g.FinalizeComposite(syncRequest("a"))
	if r.IsErr() || !r.Ok().Finalized || r.Ok().Status.IsSome() || len(r.Ok().Children) != 0 || r.Ok().Children == nil || r.Ok().ResyncAfter.IsSome() {
		t.Errorf("finalize %+v", r)
	}
}

func TestCustomizeThroughTheExports(t *testing.T) {
	g := compositeGlue(t)
	r := g.Customize(parentJSON("a"))
	if r.IsErr() {
		t.Fatal(r.Err())
	}
	rules := r.Ok()
	if len(rules) != 2 {
		t.Fatalf("%+v", rules)
	}
	if rules[0].Resource.Kind != "Secret" || rules[0].Namespace.SomeOr("") != "ns" || !slices.Equal(rules[0].Names, []string{"a", "b"}) || rules[0].LabelSelector.IsSome() {
		t.Errorf("by names: %+v", rules[0])
	}
	if rules[1].Namespace.IsSome() || rules[1].Names == nil || len(rules[1].Names) != 0 || rules[1].LabelSelector.SomeOr("") != "app=web" {
		t.Errorf("by labels: %+v", rules[1])
	}
	if r := g.Customize(parentJSON("bad-customize")); !r.IsErr() || r.Err() != (wit.Error{Code: uint8(CodeInvalid), Message: "no rules for you"}) {
		t.Errorf("%+v", r)
	}
}

func TestTheHostsCallsForTheOtherKindOfPluginTrap(t *testing.T) {
	request := kubewasm_controller_reconciler.Request{Key: wit.ObjectKey{Name: "a"}, Object: parentJSON("a")}
	composite := compositeGlue(t)
	for name, call := range map[string]func(){
		"reconcile":   func() { composite.Reconcile(request) },
		"finalize":    func() { composite.Finalize(request) },
		"released":    func() { composite.Released(request) },
		"map-related": func() { composite.MapRelated(witGVK(secret), parentJSON("a")) },
	} {
		trap := traps(call)
		if trap == nil || trap.what != name || !strings.Contains(fmt.Sprint(trap.reason), "declarative controller") {
			t.Errorf("%s on a Composite: %+v", name, trap)
		}
	}
	plain := plainGlue(t)
	for name, call := range map[string]func(){
		"customize": func() { plain.Customize(parentJSON("a")) },
		"sync":      func() { plain.Sync(syncRequest("a")) },
		"finalize":  func() { plain.FinalizeComposite(syncRequest("a")) },
	} {
		trap := traps(call)
		if trap == nil || trap.what != name || !strings.Contains(fmt.Sprint(trap.reason), "reconciles itself") {
			t.Errorf("%s on a Controller: %+v", name, trap)
		}
	}
	// And a Controller's own calls still answer.
	if r := plain.Reconcile(kubewasm_controller_reconciler.Request{Object: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"requeue"}}`}); r.IsErr() || r.Ok().RequeueAfter() != 30_000 {
		t.Errorf("%+v", r)
	}
	if trap := traps(func() { plain.MapRelated(witGVK(deployment), `{"metadata":{"name":"bad"}}`) }); trap == nil || trap.what != "map-related failed" {
		t.Errorf("map-related error: %+v", trap)
	}
}

func TestEveryExportRunsInsideTheCollectorGuard(t *testing.T) {
	for _, g := range []*glue{compositeGlue(t), plainGlue(t)} {
		calls := []func(){
			func() { g.DescribeComposition() },
			func() { g.Rules() },
			func() { g.MetadataOnly() },
			func() { g.Scope() },
			func() { g.Customize(parentJSON("a")) },
			func() { g.Sync(syncRequest("a")) },
			func() { g.FinalizeComposite(syncRequest("a")) },
			func() { g.Reconcile(kubewasm_controller_reconciler.Request{Object: parentJSON("a")}) },
			func() { g.Finalize(kubewasm_controller_reconciler.Request{Object: parentJSON("a")}) },
			func() { g.Released(kubewasm_controller_reconciler.Request{Object: parentJSON("a")}) },
			func() { g.MapRelated(witGVK(deployment), parentJSON("a")) },
		}
		for i, call := range calls {
			entered := g.entered
			traps(call) // answered or trapped: either way inside enter and leave
			if g.entered != entered+1 || g.left != g.entered {
				t.Errorf("call %d: entered %d times (was %d), left %d", i, g.entered, entered, g.left)
			}
		}
		if len(g.described) != 1 {
			t.Errorf("described %d", len(g.described))
		}
	}
}

// members is what a WIT members value says, to compare.
func members(m kubewasm_controller_clusters.Members) string {
	switch m.Tag() {
	case kubewasm_controller_clusters.Members_All:
		return "all"
	case kubewasm_controller_clusters.Members_Matching:
		return "matching " + m.Matching()
	}
	return "none"
}

func TestTheClustersExportAnswersTheScope(t *testing.T) {
	fresh := newGlue(func() *Plugin { return NewPlugin(newTestController, &recordingHost{}) })
	for name, g := range map[string]*glue{"before describe": fresh, "without a scope": plainGlue(t)} {
		if s := g.Scope(); !s.ServeLocal || members(s.Serve) != "none" || members(s.Reach) != "none" {
			t.Errorf("%s: the host's own cluster only: %+v", name, s)
		}
	}
	hub := newGlue(func() *Plugin {
		return NewPlugin(func(s settings) (*fleetController, error) { return &fleetController{testController{s: s}}, nil }, &recordingHost{})
	})
	if r := hub.Describe("{}"); r.IsErr() {
		t.Fatal(r.Err())
	}
	if s := hub.Scope(); s.ServeLocal || members(s.Serve) != "matching env=prod" || members(s.Reach) != "all" {
		t.Errorf("%+v", s)
	}
	// A Composite answers its scope too (the default here).
	if s := compositeGlue(t).Scope(); !s.ServeLocal || members(s.Serve) != "none" {
		t.Errorf("composite: %+v", s)
	}
}
