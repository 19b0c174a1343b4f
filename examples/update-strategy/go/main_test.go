// Unit tests of the update-strategy plugin under plain `go test`, against the SDK's fake host: no
// cluster, no WebAssembly. What the host then writes (per update strategy) is in ../cases, run by
// `kubewasm test` against the built component.
package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasmtest"
)

func parent(gvk kubewasm.GVK, name, spec string) kubewasm.Object {
	return kubewasmtest.Parse(`{"apiVersion": "` + gvk.APIVersion() + `", "kind": "` + gvk.Kind + `",
		"metadata": {"name": "` + name + `", "namespace": "default", "uid": "` + name + `-uid", "generation": 1},
		"spec": ` + spec + `}`)
}

func configMap(name, value string) kubewasm.Object {
	return kubewasmtest.Parse(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "` + name + `"}, "data": {"value": "` + value + `"}}`)
}

func harness(t *testing.T, kind string) *kubewasmtest.CompositeHarness {
	t.Helper()
	return kubewasmtest.NewComposite(t, New, kubewasmtest.WithSettings(Settings{Kind: kind}))
}

func TestTheKindSettingPicksParentStrategyAndName(t *testing.T) {
	for _, tc := range []struct {
		kind     string
		name     string
		parent   kubewasm.GVK
		strategy kubewasm.UpdateStrategy
	}{
		{"OnDeleteDemo", "on-delete-demo", OnDeleteDemo, kubewasm.OnDelete},
		{"RecreateDemo", "recreate-demo", RecreateDemo, kubewasm.Recreate},
	} {
		m := harness(t, tc.kind).Manifest
		if m.Name != tc.name || m.Version != "0.1.0" || m.Primary != tc.parent || m.Finalizer != "" {
			t.Errorf("%s: %+v", tc.kind, m)
		}
		if !reflect.DeepEqual(m.Owns, []kubewasm.GVK{kinds.ConfigMap}) || len(m.Watches) != 0 || len(m.Permissions) != 0 {
			t.Errorf("%s: owns %v, watches %v, permissions %v", tc.kind, m.Owns, m.Watches, m.Permissions)
		}
		want := &kubewasm.Composition{
			Children: []kubewasm.ChildRule{{GVK: kinds.ConfigMap, Strategy: tc.strategy}},
			Selector: kubewasm.GeneratedSelector,
		}
		if !reflect.DeepEqual(m.Composition, want) {
			t.Errorf("%s: composition %+v, want %+v", tc.kind, m.Composition, want)
		}
	}
}

func TestSettingsWithoutAKnownKindAreRefused(t *testing.T) {
	for settings, want := range map[string]string{
		`{}`:                                  `settings: kind is not set: set kind = "OnDeleteDemo" or kind = "RecreateDemo"`,
		`{"kind": ""}`:                        `settings: kind is not set`,
		`{"kind": "InPlaceDemo"}`:             `settings: kind "InPlaceDemo" is neither "OnDeleteDemo" nor "RecreateDemo"`,
		`{"kind": "ondeletedemo"}`:            `is neither`,
		`{"kind": "RecreateDemo", "x": true}`: `settings: unknown field "x"`,
	} {
		_, err := kubewasmtest.DescribeComposite(New, kubewasmtest.WithSettings(settings))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", settings, err, want)
		}
	}
}

// The settings files in ../manifests name the plugin they install: on-delete-demo.toml's kind
// gives the plugin on-delete-demo, and so on.
func TestSettingsFilesMatchThePluginNames(t *testing.T) {
	files, err := filepath.Glob("../manifests/*.toml")
	if err != nil || len(files) != 2 {
		t.Fatalf("%v %v", files, err)
	}
	kindLine := regexp.MustCompile(`(?m)^kind = "([A-Za-z]+)"$`)
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		match := kindLine.FindSubmatch(text)
		if match == nil {
			t.Fatalf("%s: no kind line", file)
		}
		name := harness(t, string(match[1])).Manifest.Name
		if want := strings.TrimSuffix(filepath.Base(file), ".toml"); name != want {
			t.Errorf("%s installs %s", file, name)
		}
	}
}

func TestEachParentGetsItsConfigMapAndStatus(t *testing.T) {
	for _, gvk := range []kubewasm.GVK{OnDeleteDemo, RecreateDemo} {
		h := harness(t, gvk.Kind)
		got, err := h.Sync(parent(gvk, "instance", `{"configData": "v1"}`))
		if err != nil {
			t.Fatal(err)
		}
		if !kubewasmtest.Equal(got.Children, []kubewasm.Object{configMap("instance-data", "v1")}) {
			t.Errorf("%s: children %v", gvk.Kind, got.Children)
		}
		if !kubewasmtest.Equal(got.Status, map[string]any{"observedConfigData": "v1"}) {
			t.Errorf("%s: status %v", gvk.Kind, got.Status)
		}
		if got.ResyncAfter != 0 || got.Finalized {
			t.Errorf("%s: %+v", gvk.Kind, got)
		}
		if len(h.Host.Calls) != 0 || len(h.Host.Events) != 0 {
			t.Errorf("%s: the plugin wrote: %v %v", gvk.Kind, h.Host.Calls, h.Host.Events)
		}
	}
}

func TestConfigDataDefaultsToInitial(t *testing.T) {
	h := harness(t, "RecreateDemo")
	for _, spec := range []string{`{}`, `{"configData": ""}`, `{"configData": null}`, `null`} {
		got, err := h.Sync(parent(RecreateDemo, "bare", spec))
		if err != nil {
			t.Fatal(err)
		}
		cm, ok := got.Child(kinds.ConfigMap, "bare-data")
		if value, _ := cm.String("data", "value"); !ok || value != "initial" {
			t.Errorf("%s: children %v", spec, got.Children)
		}
		if status, _ := got.Status.String("observedConfigData"); status != "initial" {
			t.Errorf("%s: status %v", spec, got.Status)
		}
	}
}

// The answer is the desired state alone: the ConfigMap the parent has (here one still at v1,
// with a key someone else added) changes nothing in it. Whether the host then updates, recreates
// or leaves that ConfigMap is the update strategy's business.
func TestTheAnswerDoesNotDependOnTheObservedConfigMap(t *testing.T) {
	for _, gvk := range []kubewasm.GVK{OnDeleteDemo, RecreateDemo} {
		h := harness(t, gvk.Kind)
		p := parent(gvk, "instance", `{"configData": "v2"}`)
		observed := configMap("instance-data", "v1")
		observed.SetField("injected", "data", "side-effect")
		observed.SetField("default", "metadata", "namespace")
		observed.SetField([]any{p.ControllerOwnerRef()}, "metadata", "ownerReferences")
		h.Host.Add(observed)
		for _, opts := range [][]kubewasmtest.SyncOption{nil, {kubewasmtest.WithChildren()}} {
			got, err := h.Sync(p, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if !kubewasmtest.Equal(got.Children, []kubewasm.Object{configMap("instance-data", "v2")}) {
				t.Errorf("%s: children %v", gvk.Kind, got.Children)
			}
			if !kubewasmtest.Equal(got.Status, map[string]any{"observedConfigData": "v2"}) {
				t.Errorf("%s: status %v", gvk.Kind, got.Status)
			}
		}
	}
}
