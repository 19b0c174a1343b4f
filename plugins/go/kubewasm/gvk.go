package kubewasm

import "strings"

// GVK is a Kubernetes kind as the API names it: group ("" for the core group), version and
// kind, e.g. GVK{"apps", "v1", "Deployment"}. The kinds package has the common ones.
type GVK struct {
	Group   string
	Version string
	Kind    string
}

// ParseAPIVersion makes a GVK from an object's apiVersion ("v1", "apps/v1") and kind.
func ParseAPIVersion(apiVersion, kind string) GVK {
	if group, version, ok := strings.Cut(apiVersion, "/"); ok {
		return GVK{Group: group, Version: version, Kind: kind}
	}
	return GVK{Version: apiVersion, Kind: kind}
}

// APIVersion is the kind's apiVersion as objects carry it: "v1", "apps/v1".
func (g GVK) APIVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

// String reads like kubectl's resource names: "Deployment.v1.apps", "Node.v1".
func (g GVK) String() string {
	if g.Group == "" {
		return g.Kind + "." + g.Version
	}
	return g.Kind + "." + g.Version + "." + g.Group
}

// sameResource is whether two kinds name the same resource in any version.
func (g GVK) sameResource(other GVK) bool {
	return g.Group == other.Group && g.Kind == other.Kind
}

// ObjectKey identifies one object of a kind known from context: its namespace ("" for
// cluster-scoped objects) and name.
type ObjectKey struct {
	Namespace string
	Name      string
}

func (k ObjectKey) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// ObjectRef identifies any object: its kind, namespace ("" for cluster-scoped objects) and name.
type ObjectRef struct {
	GVK       GVK
	Namespace string
	Name      string
}
