package kubewasm

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var deployment = GVK{"apps", "v1", "Deployment"}
var fooKind = GVK{"samplecontroller.k8s.io", "v1alpha1", "Foo"}

func TestManifestBuilder(t *testing.T) {
	spec, err := NewManifest("sample", "0.1.0").
		Primary(fooKind).
		PrimarySelector("app=web").
		Owns(deployment).
		Watches(GVK{Version: "v1", Kind: "Node"}, ByMapRelated()).
		WatchesSelected(GVK{Version: "v1", Kind: "Pod"}, ByLabel("foo"), "tier=db").
		MetadataOnly(deployment).
		MetadataOnly(GVK{Version: "v1", Kind: "Pod"}).
		Permission(deployment, VerbCreate, VerbPatch).
		StatusPermission(fooKind, VerbPatch).
		Grant(GVK{Version: "v1", Kind: "Secret"}, "", []Verb{VerbGet}, "team-a").
		GrantNamed(GVK{Version: "v1", Kind: "ConfigMap"}, []string{"get"}, nil, "settings").
		BindClusterRole("edit").
		Resync(time.Hour).
		MaxConcurrency(4).
		Limits(Limits{Deadline: 2 * time.Second, MemoryBytes: 32 << 20}).
		Spec()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "sample" || spec.Primary != fooKind || spec.PrimarySelector != "app=web" || spec.MaxConcurrency != 4 || *spec.Resync != time.Hour {
		t.Errorf("%+v", spec)
	}
	if len(spec.Watches) != 2 || spec.Watches[1].Mapping != ByLabel("foo") || spec.Watches[1].LabelSelector != "tier=db" {
		t.Errorf("watches %+v", spec.Watches)
	}
	if len(spec.MetadataOnly) != 2 || spec.MetadataOnly[0] != deployment || spec.MetadataOnly[1].Kind != "Pod" || len(spec.Owns) != 1 {
		t.Errorf("metadata-only %+v (owns %+v)", spec.MetadataOnly, spec.Owns)
	}
	if len(spec.Permissions) != 3 || spec.Permissions[1].Subresource != "status" || spec.Permissions[2].Namespaces[0] != "team-a" {
		t.Errorf("permissions %+v", spec.Permissions)
	}
	if len(spec.Rules) != 2 || spec.Rules[0].ResourceNames[0] != "settings" || spec.Rules[1].Verbs[0] != "bind" {
		t.Errorf("rules %+v", spec.Rules)
	}
}

func TestManifestDefaultsAndChecks(t *testing.T) {
	spec, err := NewManifest("a", "1").Primary(fooKind).Spec()
	if err != nil || spec.MaxConcurrency != 1 || spec.Resync != nil || spec.Limits != (Limits{}) || len(spec.MetadataOnly) != 0 || spec.Clusters != (ClusterScope{ServeLocal: true}) {
		t.Errorf("%+v %v", spec, err)
	}
	if _, err := NewManifest("a", "1").Spec(); err == nil || !strings.Contains(err.Error(), "primary") {
		t.Errorf("no primary: %v", err)
	}
	if _, err := NewManifest("a", "1").Primary(fooKind).Rule(Rule{GVK: fooKind, Verbs: []string{"*"}}).Spec(); err == nil || !strings.Contains(err.Error(), "not an RBAC verb") {
		t.Errorf("bad verb: %v", err)
	}
}

func TestAFinalizerGetsItsPatchGrant(t *testing.T) {
	spec, _ := NewManifest("a", "1").Primary(fooKind).Finalizer("x.io/cleanup").Spec()
	if len(spec.Permissions) != 1 || spec.Permissions[0].GVK != fooKind || spec.Permissions[0].Verbs[0] != VerbPatch {
		t.Errorf("%+v", spec.Permissions)
	}
	spec, _ = NewManifest("a", "1").Primary(fooKind).Permission(fooKind, VerbPatch).Finalizer("x.io/cleanup").Spec()
	if len(spec.Permissions) != 1 {
		t.Errorf("not added twice: %+v", spec.Permissions)
	}
}

func TestOwnedSaysWhatMayBeDeleted(t *testing.T) {
	m := NewManifest("a", "1").Primary(fooKind).Owns(deployment).Owns(GVK{Version: "v1", Kind: "Service"}).Permission(deployment, VerbDelete)
	owned := m.Owned()
	if len(owned) != 2 || !owned[0].MayDelete || owned[1].MayDelete {
		t.Errorf("%+v", owned)
	}
}

func TestManifestClusterScope(t *testing.T) {
	spec, err := NewManifest("a", "1").Primary(fooKind).ReachMembers(MembersMatching("env=prod")).Spec()
	if err != nil || spec.Clusters != (ClusterScope{ServeLocal: true, Serve: NoMembers(), Reach: MembersMatching("env=prod")}) {
		t.Errorf("a hub: %+v %v", spec.Clusters, err)
	}
	spec, err = NewManifest("a", "1").Primary(fooKind).ServeLocal(false).ServeMembers(AllMembers()).Spec()
	if err != nil || spec.Clusters != (ClusterScope{ServeLocal: false, Serve: AllMembers(), Reach: NoMembers()}) {
		t.Errorf("members only: %+v %v", spec.Clusters, err)
	}
	if _, err := NewManifest("a", "1").Primary(fooKind).ServeLocal(false).ReachMembers(AllMembers()).Spec(); err == nil || !strings.Contains(err.Error(), "serves no cluster") {
		t.Errorf("serving nothing: %v", err)
	}
	// Members: the zero value is none; each says what it is.
	if (Members{}) != NoMembers() || !NoMembers().IsNone() || !AllMembers().IsAll() || AllMembers().IsNone() {
		t.Error("none and all")
	}
	if sel, ok := MembersMatching("env in (eu,us)").Selector(); !ok || sel != "env in (eu,us)" {
		t.Errorf("%q %v", sel, ok)
	}
	if _, ok := AllMembers().Selector(); ok {
		t.Error("all has no selector")
	}
	if got := fmt.Sprint(NoMembers(), AllMembers(), MembersMatching("env=prod")); got != `none all matching("env=prod")` {
		t.Error(got)
	}
}
