package kubewasm

// Typed objects without TypeMeta: k8s.io/api structs (and a CRD's Go types) leave apiVersion
// and kind empty unless the author fills them, which controller-runtime does from its Scheme.
// The SDK has no Scheme; it has the manifest, which names every kind the plugin may read or
// write. A typed object written without apiVersion or kind gets them from the declared kind
// whose name is the Go type's name, narrowed by the type's package path where that is
// ambiguous (k8s.io/api/<group>/<version>, or any package ending in a version).

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// declaredKinds are the kinds a manifest names, by kind name.
type declaredKinds map[string][]GVK

func declaredKindsOf(spec ManifestSpec) declaredKinds {
	kinds := declaredKinds{}
	add := func(g GVK) {
		if g.Kind != "" && !slices.Contains(kinds[g.Kind], g) {
			kinds[g.Kind] = append(kinds[g.Kind], g)
		}
	}
	add(spec.Primary)
	for _, g := range spec.Owns {
		add(g)
	}
	for _, w := range spec.Watches {
		add(w.GVK)
	}
	for _, g := range spec.MetadataOnly {
		add(g)
	}
	for _, p := range spec.Permissions {
		add(p.GVK)
	}
	for _, r := range spec.Rules {
		add(r.GVK)
	}
	if spec.Composition != nil {
		for _, c := range spec.Composition.Children {
			add(c.GVK)
		}
	}
	return kinds
}

// versionLike is whether s is a Kubernetes API version: v1, v2beta1, v1alpha3. By hand: regexp
// would add its package to every Go plugin and compile the pattern at every instantiation.
func versionLike(s string) bool {
	digits := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	rest, ok := strings.CutPrefix(s, "v")
	if !ok {
		return false
	}
	for _, level := range []string{"alpha", "beta"} {
		if major, minor, found := strings.Cut(rest, level); found {
			return digits(major) && digits(minor)
		}
	}
	return digits(rest)
}

// kindOf is the declared kind of a Go type: the one named as the type, of the package's version
// when its path ends in one, and of the package's group when that still leaves several
// (k8s.io/api/core/v1 is the core group "", k8s.io/api/rbac/v1 is rbac.authorization.k8s.io).
func (k declaredKinds) kindOf(t reflect.Type) (GVK, error) {
	candidates := k[t.Name()]
	dir, version := "", ""
	if parts := strings.Split(t.PkgPath(), "/"); len(parts) >= 2 && versionLike(parts[len(parts)-1]) {
		dir, version = parts[len(parts)-2], parts[len(parts)-1]
		candidates = slices.DeleteFunc(slices.Clone(candidates), func(g GVK) bool { return g.Version != version })
	}
	if len(candidates) > 1 && dir != "" {
		// A guess that only narrows: a package named after no group leaves the candidates.
		ofGroup := slices.DeleteFunc(slices.Clone(candidates), func(g GVK) bool {
			if dir == "core" {
				return g.Group != ""
			}
			return g.Group != dir && !strings.HasPrefix(g.Group, dir+".")
		})
		if len(ofGroup) > 0 {
			candidates = ofGroup
		}
	}
	switch len(candidates) {
	case 1:
		return candidates[0], nil
	case 0:
		wanted := t.Name()
		if version != "" {
			wanted += " of version " + version
		}
		return GVK{}, &Error{Code: CodeInvalid, Message: fmt.Sprintf("%s has no apiVersion and kind, and the manifest declares no kind %s: set its TypeMeta", t, wanted)}
	}
	names := make([]string, len(candidates))
	for i, g := range candidates {
		names[i] = g.String()
	}
	return GVK{}, &Error{Code: CodeInvalid, Message: fmt.Sprintf("%s has no apiVersion and kind, and the manifest declares several kinds it could be (%s): set its TypeMeta", t, strings.Join(names, ", "))}
}

// encodeObject is v's JSON text as an object for the host. A named struct (or pointer to one) whose
// text lacks apiVersion or kind gets what it lacks from the declared kind of its type; anything
// else (an Object, a map, text) is encoded as it is.
func (k declaredKinds) encodeObject(v any) ([]byte, error) {
	text, err := marshal(v)
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if err != nil || t == nil || t.Kind() != reflect.Struct || t.Name() == "" {
		return text, err
	}
	obj, err := parseObject(string(text))
	if err != nil {
		return text, nil // not an object: the caller says so
	}
	apiVersion, _ := obj.String("apiVersion")
	kind, _ := obj.String("kind")
	if apiVersion != "" && kind != "" {
		return text, nil
	}
	gvk, err := k.kindOf(t)
	if err != nil {
		return nil, err
	}
	if apiVersion == "" {
		obj.SetField(gvk.APIVersion(), "apiVersion")
	}
	if kind == "" {
		obj.SetField(gvk.Kind, "kind")
	}
	return marshal(obj)
}
