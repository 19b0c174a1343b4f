package kubewasmtest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

func TestInClusterWritesLandInTheMember(t *testing.T) {
	h := NewFakeHost(cm("a", "hub", nil))
	eu := h.AddMember("eu", map[string]string{"env": "prod"}, cm("a", "there", nil))
	ctx := ctxOf(h)
	in := ctx.InCluster("eu")
	if _, err := in.Apply(cm("a", "copy", nil)); err != nil {
		t.Fatal(err)
	}
	if _, ok := eu.Object(kinds.ConfigMap, "a", "copy"); !ok || len(eu.Applied()) != 1 {
		t.Errorf("the member holds the copy: %v", eu.Applied())
	}
	if _, ok := h.Object(kinds.ConfigMap, "a", "copy"); ok || len(h.Calls) != 0 {
		t.Errorf("the host's own cluster is untouched: %v", h.Calls)
	}
	// Reads there read the member's store.
	if got, err := in.Get(kinds.ConfigMap, "a", "there"); err != nil || got.Name() != "there" {
		t.Errorf("%v %v", got, err)
	}
	if _, err := in.Get(kinds.ConfigMap, "a", "hub"); !kubewasm.IsNotFound(err) {
		t.Errorf("the hub's objects are not there: %v", err)
	}
	if all, err := in.List(kinds.ConfigMap); err != nil || len(all) != 2 {
		t.Errorf("%v %v", all, err)
	}
	// Every other write goes there too.
	if _, err := in.Patch(kinds.ConfigMap, "a", "copy", kubewasm.MergePatch, `{"data": {"k": "w"}}`); err != nil {
		t.Fatal(err)
	}
	if err := in.Delete(kinds.ConfigMap, "a", "there"); err != nil {
		t.Fatal(err)
	}
	if ops := eu.Writes(""); len(ops) != 3 || ops[1].Op != "patch" || ops[2].Op != "delete" {
		t.Errorf("%+v", ops)
	}
	// Events and logs stay with the call.
	_ = in.Event(cm("a", "hub", nil), kubewasm.Normal, "Copied", "Reconcile", "")
	in.Info("copied")
	if len(h.Events) != 1 || len(h.Logs) != 1 || len(eu.Events) != 0 || len(eu.Logs) != 0 {
		t.Errorf("events %v / %v, logs %v / %v", h.Events, eu.Events, h.Logs, eu.Logs)
	}
	// "" is the host's own cluster.
	if got, err := ctx.InCluster("").Get(kinds.ConfigMap, "a", "hub"); err != nil || got.Name() != "hub" {
		t.Errorf("%v %v", got, err)
	}
	// Failures are injected per cluster.
	eu.Fail("apply", kubewasm.NewError(kubewasm.CodeUnavailable, "no answer"), 1)
	if _, err := in.Apply(cm("a", "copy", nil)); !kubewasm.IsUnavailable(err) {
		t.Errorf("%v", err)
	}
	if _, err := ctx.Apply(cm("a", "copy", nil)); err != nil {
		t.Errorf("not in the host's own: %v", err)
	}
}

func TestUnknownAndUnreachedMembers(t *testing.T) {
	h := NewFakeHost()
	h.AddMember("dev", map[string]string{"env": "dev"})
	ctx := ctxOf(h)
	_, err := ctx.InCluster("nowhere").Apply(cm("a", "x", nil))
	if !errors.Is(err, kubewasm.ErrUnavailable) || err.Error() != `cluster "nowhere" is not engaged by this host now` {
		t.Errorf("%v", err)
	}
	if err := ctx.InCluster("nowhere").Delete(kinds.ConfigMap, "a", "x"); !kubewasm.IsUnavailable(err) {
		t.Errorf("%v", err)
	}
	// Without a Scope every member is reachable; with one, only those it serves or reaches.
	if _, err := ctx.InCluster("dev").Apply(cm("a", "x", nil)); err != nil {
		t.Errorf("%v", err)
	}
	h.Scope = &kubewasm.ClusterScope{ServeLocal: true, Reach: kubewasm.MembersMatching("env=prod")}
	if _, err := ctx.InCluster("dev").Get(kinds.ConfigMap, "a", "x"); !kubewasm.IsForbidden(err) || !strings.Contains(err.Error(), "not within the plugin's clusters") {
		t.Errorf("%v", err)
	}
	// A removed member is no longer engaged.
	h.AddMember("prod", map[string]string{"env": "prod"})
	h.RemoveMember("prod")
	if _, err := ctx.InCluster("prod").List(kinds.ConfigMap); !kubewasm.IsUnavailable(err) {
		t.Errorf("%v", err)
	}
	// Bounds come first.
	if _, err := ctx.InCluster(strings.Repeat("c", 254)).List(kinds.ConfigMap); err == nil || err.Error() != "cluster is 254 bytes; at most 253" {
		t.Errorf("%v", err)
	}
}

func TestClustersListsTheMembersInScope(t *testing.T) {
	h := NewFakeHost()
	for name, env := range map[string]string{"us": "prod", "eu": "prod", "lab": "dev"} {
		h.AddMember(name, map[string]string{"env": env})
	}
	ctx := ctxOf(h)
	names := func() (out []string) {
		for _, c := range ctx.Clusters() {
			out = append(out, c.Name)
		}
		return out
	}
	if got := names(); !reflect.DeepEqual(got, []string{"eu", "lab", "us"}) {
		t.Errorf("sorted, every member without a Scope: %v", got)
	}
	h.Scope = &kubewasm.ClusterScope{ServeLocal: true, Reach: kubewasm.MembersMatching("env=prod")}
	if got := names(); !reflect.DeepEqual(got, []string{"eu", "us"}) {
		t.Errorf("%v", got)
	}
	if got := ctx.Clusters()[0]; !reflect.DeepEqual(got.Labels, map[string]string{"env": "prod"}) {
		t.Errorf("%+v", got)
	}
	h.Scope = &kubewasm.ClusterScope{ServeLocal: false, Serve: kubewasm.MembersMatching("env=dev")}
	if got := names(); !reflect.DeepEqual(got, []string{"lab"}) {
		t.Errorf("served members are listed: %v", got)
	}
	h.Scope = &kubewasm.ClusterScope{ServeLocal: true}
	if got := ctx.Clusters(); got == nil || len(got) != 0 {
		t.Errorf("a plugin without a scope reaches none: %v", got)
	}
	// The call's cluster: "" in the host's own, the member's name in a member (whose InCluster
	// names the others, and "" the host's own).
	eu := h.Member("eu")
	if ctx.Cluster() != "" || ctxOf(eu).Cluster() != "eu" || h.Member("nowhere") != nil {
		t.Error("cluster")
	}
	h.Scope = nil
	if _, err := ctxOf(eu).InCluster("").Apply(cm("a", "from-eu", nil)); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Object(kinds.ConfigMap, "a", "from-eu"); !ok {
		t.Error("written into the host's own cluster")
	}
	if _, err := ctxOf(eu).InCluster("us").Apply(cm("a", "from-eu", nil)); err != nil || len(h.Member("us").Applied()) != 1 {
		t.Errorf("written into another member: %v", err)
	}
	h.Reset()
	if len(h.Calls) != 0 || len(h.Member("us").Calls) != 0 {
		t.Error("Reset forgets the members' calls too")
	}
}

// hub copies its ConfigMaps into every member it reaches.
type hub struct{}

func newHub(kubewasm.NoSettings) (*hub, error) { return &hub{}, nil }

func (*hub) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("hub", "0.1.0").Primary(kinds.ConfigMap).ReachMembers(kubewasm.MembersMatching("env=prod")).
		Permission(kinds.ConfigMap, kubewasm.VerbCreate, kubewasm.VerbPatch)
}

func (*hub) Reconcile(ctx *kubewasm.Context, obj kubewasm.Object) (kubewasm.Result, error) {
	for _, c := range ctx.Clusters() {
		if _, err := ctx.InCluster(c.Name).Apply(kubewasm.NewObject(kinds.ConfigMap, obj.Namespace(), obj.Name())); err != nil {
			return kubewasm.Result{}, err
		}
	}
	return kubewasm.Result{}, nil
}

func TestTheHarnessReachesTheManifestsMembers(t *testing.T) {
	obj := cm("a", "x", nil)
	h := New(t, newHub, WithObjects(obj), WithMember("eu", map[string]string{"env": "prod"}), WithMember("lab", map[string]string{"env": "dev"}, cm("a", "old", nil)))
	if h.Manifest.Clusters.Reach != kubewasm.MembersMatching("env=prod") || h.Host.Scope == nil || *h.Host.Scope != h.Manifest.Clusters {
		t.Errorf("%+v %+v", h.Manifest.Clusters, h.Host.Scope)
	}
	if _, err := h.Reconcile(obj); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Host.Member("eu").Object(kinds.ConfigMap, "a", "x"); !ok {
		t.Error("copied into the prod member")
	}
	if lab := h.Host.Member("lab"); len(lab.Calls) != 0 || len(lab.Objects(kinds.ConfigMap)) != 1 {
		t.Errorf("not into the dev member: %v", lab.Calls)
	}
	if _, err := ctxOf(h.Host).InCluster("lab").Get(kinds.ConfigMap, "a", "old"); !kubewasm.IsForbidden(err) {
		t.Errorf("the dev member is out of reach: %v", err)
	}
}
