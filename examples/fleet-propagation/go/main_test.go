// Unit tests of fleet-propagation under plain `go test`, against the SDK's fake host and its
// member clusters: no cluster, no WebAssembly.
package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasmtest"
)

func sourceMap() kubewasm.Object {
	return kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "settings", "namespace": "apps", "uid": "src-uid",
			"labels": {"fleet.kubewasm.io/propagate": "true", "team": "a"}, "finalizers": ["fleet.kubewasm.io/copies"]},
		"data": {"mode": "fast"}, "binaryData": {"blob": "AAE="}, "immutable": true}`)
}

// expectedCopy is what every prod member gets: the data, under the source's name, labelled.
func expectedCopy() kubewasm.Object {
	return kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "settings", "namespace": "apps", "labels": {"fleet.kubewasm.io/source": "settings"}},
		"data": {"mode": "fast"}, "binaryData": {"blob": "AAE="}, "immutable": true}`)
}

var (
	prod = map[string]string{"env": "prod"}
	dev  = map[string]string{"env": "dev"}
)

// fleet is the plugin with the source in the hub and three members: eu and us (prod), lab (dev).
func fleet(t *testing.T, opts ...kubewasmtest.Option) *kubewasmtest.Harness {
	opts = append([]kubewasmtest.Option{
		kubewasmtest.WithObjects(sourceMap()),
		kubewasmtest.WithMember("us", prod),
		kubewasmtest.WithMember("eu", prod),
		kubewasmtest.WithMember("lab", dev),
	}, opts...)
	return kubewasmtest.New(t, New, opts...)
}

func propagated(note string) []kubewasm.Event {
	return []kubewasm.Event{{
		Regarding: kubewasm.ObjectRef{GVK: kinds.ConfigMap, Namespace: "apps", Name: "settings"},
		Type:      kubewasm.Normal, Reason: "Propagated", Action: "Reconcile", Note: note,
	}}
}

func TestManifest(t *testing.T) {
	m := kubewasmtest.New(t, New).Manifest
	if m.Name != "fleet-propagation" || m.Primary != kinds.ConfigMap || m.PrimarySelector != "fleet.kubewasm.io/propagate=true" || m.Finalizer != "fleet.kubewasm.io/copies" {
		t.Errorf("%+v", m)
	}
	want := kubewasm.ClusterScope{ServeLocal: true, Serve: kubewasm.NoMembers(), Reach: kubewasm.MembersMatching("env=prod")}
	if m.Clusters != want {
		t.Errorf("clusters %+v", m.Clusters)
	}
	grants := []kubewasm.Permission{{GVK: kinds.ConfigMap, Verbs: []kubewasm.Verb{kubewasm.VerbCreate, kubewasm.VerbPatch, kubewasm.VerbDelete}}}
	if !reflect.DeepEqual(m.Permissions, grants) {
		t.Errorf("permissions %+v", m.Permissions)
	}
	other := kubewasmtest.New(t, New, kubewasmtest.WithSettings(`{"members": "region in (eu,us)"}`)).Manifest
	if other.Clusters.Reach != kubewasm.MembersMatching("region in (eu,us)") {
		t.Errorf("the members setting: %+v", other.Clusters)
	}
	if _, err := kubewasmtest.Describe(New, kubewasmtest.WithSettings(`{"member": "env=prod"}`)); err == nil {
		t.Error("an unknown setting is refused")
	}
}

func TestCopiesLandInTheProdMembers(t *testing.T) {
	h := fleet(t)
	result, err := h.Reconcile(sourceMap())
	if err != nil || result != (kubewasm.Result{}) {
		t.Fatalf("%v %v", result, err)
	}
	for _, name := range []string{"eu", "us"} {
		member := h.Host.Member(name)
		if got := member.Applied(); !kubewasmtest.Equal(got, []kubewasm.Object{expectedCopy()}) {
			t.Errorf("%s: applied %v", name, got)
		}
		if c := member.Calls[0]; !c.Force {
			t.Errorf("%s: apply without force", name)
		}
		if _, ok := member.Object(kinds.ConfigMap, "apps", "settings"); !ok {
			t.Errorf("%s holds no copy", name)
		}
	}
	if lab := h.Host.Member("lab"); len(lab.Calls) != 0 {
		t.Errorf("the dev member got %v", lab.Calls)
	}
	if len(h.Host.Calls) != 0 {
		t.Errorf("the hub got %v", h.Host.Calls)
	}
	if !reflect.DeepEqual(h.Host.Events, propagated("copied to 2 member cluster(s): eu,us")) {
		t.Errorf("%+v", h.Host.Events)
	}
	// Again: the same copies, applied over.
	h.Host.Reset()
	if _, err := h.Reconcile(sourceMap()); err != nil || len(h.Host.Member("eu").Applied()) != 1 {
		t.Errorf("%v", err)
	}
}

func TestACopyWithoutOptionalFields(t *testing.T) {
	src := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "empty", "namespace": "apps"}}`)
	h := fleet(t)
	if _, err := h.Reconcile(src); err != nil {
		t.Fatal(err)
	}
	want := kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "empty", "namespace": "apps", "labels": {"fleet.kubewasm.io/source": "empty"}}}`)
	if got := h.Host.Member("eu").Applied(); !kubewasmtest.Equal(got, []kubewasm.Object{want}) {
		t.Errorf("%v", got)
	}
}

func TestTheMembersSettingChoosesTheMembers(t *testing.T) {
	h := fleet(t, kubewasmtest.WithSettings(map[string]string{"members": "env=dev"}))
	if _, err := h.Reconcile(sourceMap()); err != nil {
		t.Fatal(err)
	}
	if len(h.Host.Member("lab").Applied()) != 1 || len(h.Host.Member("eu").Calls) != 0 {
		t.Error("only the dev member")
	}
	if !reflect.DeepEqual(h.Host.Events, propagated("copied to 1 member cluster(s): lab")) {
		t.Errorf("%+v", h.Host.Events)
	}
}

func TestAnUnavailableMemberIsTriedAgainIn30Seconds(t *testing.T) {
	h := fleet(t)
	h.Host.Member("eu").Fail("apply", kubewasm.NewError(kubewasm.CodeUnavailable, "the API server does not answer"), 1)
	result, err := h.Reconcile(sourceMap())
	if err != nil || result != (kubewasm.Result{RequeueAfter: 30 * time.Second}) {
		t.Fatalf("%v %v", result, err)
	}
	if _, ok := h.Host.Member("us").Object(kinds.ConfigMap, "apps", "settings"); !ok {
		t.Error("the other member gets its copy")
	}
	if !reflect.DeepEqual(h.Host.Events, propagated("copied to 1 member cluster(s): us")) {
		t.Errorf("%+v", h.Host.Events)
	}
	if len(h.Host.Logs) != 1 || h.Host.Logs[0].Level != kubewasm.LevelWarn || h.Host.Logs[0].Fields["cluster"] != "eu" {
		t.Errorf("%+v", h.Host.Logs)
	}
	// 30 s later it answers.
	if result, err := h.Reconcile(sourceMap()); err != nil || result != (kubewasm.Result{}) {
		t.Errorf("%v %v", result, err)
	}
	if _, ok := h.Host.Member("eu").Object(kinds.ConfigMap, "apps", "settings"); !ok {
		t.Error("eu has its copy now")
	}
}

func TestAMemberDisengagedMeanwhileIsNotListed(t *testing.T) {
	h := fleet(t)
	h.Host.RemoveMember("eu")
	if result, err := h.Reconcile(sourceMap()); err != nil || result != (kubewasm.Result{}) {
		t.Fatalf("%v %v", result, err)
	}
	if !reflect.DeepEqual(h.Host.Events, propagated("copied to 1 member cluster(s): us")) {
		t.Errorf("%+v", h.Host.Events)
	}
}

func TestOtherErrorsFailTheReconcileNamingTheMember(t *testing.T) {
	h := fleet(t)
	h.Host.Member("us").Fail("apply", kubewasm.NewError(kubewasm.CodeForbidden, "RBAC says no"), 1)
	_, err := h.Reconcile(sourceMap())
	if !kubewasm.IsForbidden(err) || err.Error() != "cluster us: RBAC says no" {
		t.Errorf("%v", err)
	}
	if len(h.Host.Events) != 0 {
		t.Errorf("%+v", h.Host.Events)
	}
}

func TestManyMembersStillMakeAnEvent(t *testing.T) {
	var opts []kubewasmtest.Option
	for i := range 20 {
		opts = append(opts, kubewasmtest.WithMember(strings.Repeat(string(rune('a'+i)), 60), prod))
	}
	h := fleet(t, opts...)
	if _, err := h.Reconcile(sourceMap()); err != nil {
		t.Fatal(err)
	}
	if note := h.Host.Events[0].Note; len(note) > kubewasm.MaxEventNote || !strings.HasPrefix(note, "copied to 22 member cluster(s): aaa") {
		t.Errorf("%d bytes: %s", len(note), note)
	}
}

func TestFinalizeDeletesTheCopies(t *testing.T) {
	h := fleet(t)
	if _, err := h.Reconcile(sourceMap()); err != nil {
		t.Fatal(err)
	}
	// us lost its copy already; lab holds a ConfigMap of the name that is not a copy.
	if err := h.Host.Member("us").Delete(kinds.ConfigMap, "apps", "settings"); err != nil {
		t.Fatal(err)
	}
	h.Host.Member("lab").Add(expectedCopy())
	h.Host.Reset()
	result, err := h.Finalize(sourceMap())
	if err != nil || result != (kubewasm.Result{}) {
		t.Fatalf("%v %v", result, err)
	}
	for _, name := range []string{"eu", "us"} {
		member := h.Host.Member(name)
		if _, ok := member.Object(kinds.ConfigMap, "apps", "settings"); ok {
			t.Errorf("%s still holds the copy", name)
		}
		if deletes := member.Writes("delete"); len(deletes) != 1 || deletes[0].Name != "settings" || deletes[0].Namespace != "apps" {
			t.Errorf("%s: %+v", name, deletes)
		}
	}
	if _, ok := h.Host.Member("lab").Object(kinds.ConfigMap, "apps", "settings"); !ok {
		t.Error("a member out of reach is left alone")
	}
	if _, ok := h.Host.Object(kinds.ConfigMap, "apps", "settings"); !ok || len(h.Host.Calls) != 0 {
		t.Error("the source is the host's to delete")
	}
}

func TestFinalizeWaitsForAnUnavailableMember(t *testing.T) {
	h := fleet(t)
	h.Host.Member("us").Fail("delete", kubewasm.NewError(kubewasm.CodeUnavailable, "not synced"), 1)
	if result, err := h.Finalize(sourceMap()); err != nil || result != (kubewasm.Result{RequeueAfter: 30 * time.Second}) {
		t.Errorf("%v %v", result, err)
	}
	h.Host.Member("eu").Fail("delete", kubewasm.NewError(kubewasm.CodeForbidden, "no delete"), 1)
	if _, err := h.Finalize(sourceMap()); !kubewasm.IsForbidden(err) || err.Error() != "cluster eu: no delete" {
		t.Errorf("%v", err)
	}
}
