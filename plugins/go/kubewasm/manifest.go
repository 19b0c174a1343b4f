package kubewasm

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Verb is a Kubernetes API verb a permission grants, with the meaning RBAC gives it.
type Verb uint8

const (
	VerbGet Verb = iota
	VerbList
	VerbWatch
	VerbCreate
	VerbUpdate
	VerbPatch
	VerbDelete
)

var verbNames = [...]string{"get", "list", "watch", "create", "update", "patch", "delete"}

func (v Verb) String() string {
	if int(v) < len(verbNames) {
		return verbNames[v]
	}
	return fmt.Sprintf("verb(%d)", uint8(v))
}

// RBACVerbs are the verbs a Rule may name: RBAC's, without "*".
var RBACVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "bind", "escalate", "impersonate", "approve", "sign", "use"}

// MappingKind says how an event on a watched object becomes keys of primary objects.
type MappingKind uint8

const (
	// MapOwnerReferences: the object's owners of the primary kind, in its namespace.
	MapOwnerReferences MappingKind = iota
	// MapLabel: the primary named by the value of a label on the object, in its namespace.
	MapLabel
	// MapRelated: the controller's MapRelated method decides (the controller implements
	// RelatedMapper).
	MapRelated
)

// Mapping is how a watch turns events into primary keys: ByOwnerReferences(), ByLabel(key) or
// ByMapRelated().
type Mapping struct {
	Kind     MappingKind
	LabelKey string
}

// ByOwnerReferences maps an object to its owners of the primary kind.
func ByOwnerReferences() Mapping { return Mapping{Kind: MapOwnerReferences} }

// ByLabel maps an object to the primary named by this label's value.
func ByLabel(key string) Mapping { return Mapping{Kind: MapLabel, LabelKey: key} }

// ByMapRelated maps an object through the controller's MapRelated method.
func ByMapRelated() Mapping { return Mapping{Kind: MapRelated} }

// Watch is a resource the plugin reacts to besides its primary and owned resources.
type Watch struct {
	GVK     GVK
	Mapping Mapping
	// LabelSelector restricts the watched objects ("" for all).
	LabelSelector string
}

// Permission is one grant: verbs on a resource (or its Subresource, "" for none), in
// Namespaces (empty for every namespace the host serves).
type Permission struct {
	GVK         GVK
	Subresource string
	Verbs       []Verb
	Namespaces  []string
}

// Rule is a grant the permission record cannot hold (any RBAC verb, object names): what the
// plugin's access export answers.
type Rule struct {
	GVK           GVK
	Subresource   string
	Verbs         []string
	Namespaces    []string
	ResourceNames []string
}

// Members is a choice of member clusters (contract 0.1.4): the clusters a host engages besides
// its own, from kubeconfig files or Secrets, each with labels. NoMembers() (the zero value),
// AllMembers() or MembersMatching(selector).
type Members struct {
	kind     membersKind
	selector string
}

type membersKind uint8

const (
	membersNone membersKind = iota
	membersAll
	membersMatching
)

// NoMembers is no member cluster (the zero Members).
func NoMembers() Members { return Members{} }

// AllMembers is every engaged member cluster.
func AllMembers() Members { return Members{kind: membersAll} }

// MembersMatching is the engaged member clusters whose labels match a label selector, e.g.
// "env=prod" or "env=prod,region in (eu,us)" (at most 4096 bytes; the host refuses an invalid
// one at load, naming the field).
func MembersMatching(selector string) Members {
	return Members{kind: membersMatching, selector: selector}
}

// IsNone is whether m chooses no member.
func (m Members) IsNone() bool { return m.kind == membersNone }

// IsAll is whether m chooses every member.
func (m Members) IsAll() bool { return m.kind == membersAll }

// Selector is the label selector of MembersMatching, and whether m is one.
func (m Members) Selector() (string, bool) { return m.selector, m.kind == membersMatching }

func (m Members) String() string {
	switch m.kind {
	case membersAll:
		return "all"
	case membersMatching:
		return fmt.Sprintf("matching(%q)", m.selector)
	}
	return "none"
}

// ClusterScope is which clusters a plugin serves and reaches: what the clusters export
// answers (contract 0.1.4). A manifest that says nothing serves the host's own cluster only:
// {ServeLocal: true, Serve: NoMembers(), Reach: NoMembers()}.
type ClusterScope struct {
	// ServeLocal is whether the plugin reconciles the primaries of the host's own cluster.
	ServeLocal bool
	// Serve are the member clusters whose primaries it reconciles too, each where it lives.
	Serve Members
	// Reach are the member clusters it only reads and writes in, through Context.InCluster
	// (those it serves are reached too, and so is the host's own cluster, always).
	Reach Members
}

// Limits are the limits the plugin asks for; zero takes the host's default (5 s; 64 MiB).
type Limits struct {
	// Deadline is the wall-clock time one call may take, host calls included (millisecond
	// precision).
	Deadline time.Duration
	// MemoryBytes is the linear memory one instance may grow to.
	MemoryBytes uint64
}

// ManifestSpec is the plain data of a manifest, field for field the WIT manifest record, plus
// Rules, MetadataOnly, ReadsFields and Clusters (the access, views, projections and clusters
// exports' answers). Read it in tests (kubewasmtest.Harness.Manifest).
type ManifestSpec struct {
	Name            string
	Version         string
	Primary         GVK
	PrimarySelector string
	Owns            []GVK
	Watches         []Watch
	// MetadataOnly are owned or watched kinds the plugin is handed only the metadata of.
	MetadataOnly []GVK
	// ReadsFields are kinds the plugin is handed only some fields of.
	ReadsFields []FieldsRead
	Finalizer   string
	// Resync is nil for the host's default (10 hours); 0 disables resync.
	Resync         *time.Duration
	MaxConcurrency uint32
	Limits         Limits
	Permissions    []Permission
	Rules          []Rule
	// Composition is what the composite export's describe-composition answers: a declarative
	// controller's child kinds and child selector (Child, ChildSelector). Nil for a Controller.
	Composition *Composition
	// Clusters is what the clusters export answers: the clusters the plugin serves and reaches
	// (ServeLocal, ServeMembers, ReachMembers; by default the host's own cluster only).
	Clusters ClusterScope
	// Webhooks and Conversions are what the webhooks export's declare answers: the admission
	// hooks (Webhook) and the custom resources the plugin converts (Converts).
	Webhooks    []AdmissionHook
	Conversions []GVK
}

// Manifest says what a controller reconciles and what it needs. Start with NewManifest, then
// chain:
//
//	kubewasm.NewManifest("sample-controller", "0.1.0").
//		Primary(foo).
//		Owns(kinds.Deployment).
//		Permission(kinds.Deployment, kubewasm.VerbCreate, kubewasm.VerbPatch).
//		StatusPermission(foo, kubewasm.VerbPatch).
//		MaxConcurrency(2)
//
// Everything declared is what the plugin's identity needs: the host refuses to start a plugin
// whose ServiceAccount RBAC does not grant it, and `kubewasm rbac` prints Roles that do.
//
// A Go plugin instance holds about 9 MiB of linear memory once it has described itself, well
// inside the host's default cap of 64 MiB; ask for more (Limits) when a reconcile holds many or
// large objects at once.
type Manifest struct {
	spec ManifestSpec
	errs []string
	// composition is what Child and ChildSelector declared (nil when neither was called).
	composition *Composition
}

// NewManifest is a manifest with one worker, the host's default limits and resync, and no
// primary yet.
func NewManifest(name, version string) *Manifest {
	return &Manifest{spec: ManifestSpec{Name: name, Version: version, MaxConcurrency: 1, Clusters: ClusterScope{ServeLocal: true}}}
}

// Primary sets the reconciled resource.
func (m *Manifest) Primary(gvk GVK) *Manifest { m.spec.Primary = gvk; return m }

// PrimarySelector reconciles only the primaries matching this label selector.
func (m *Manifest) PrimarySelector(selector string) *Manifest {
	m.spec.PrimarySelector = selector
	return m
}

// Owns declares objects this controller creates with an owner reference to the primary: an
// event on one reconciles its controlling owner.
func (m *Manifest) Owns(gvk GVK) *Manifest { m.spec.Owns = append(m.spec.Owns, gvk); return m }

// Child declares a child kind of a declarative controller (a Composite): an Owns kind (added
// once) whose objects the host creates, updates by strategy (OnDelete, Recreate, InPlace) and
// deletes as the controller's Sync answers. Declaring a kind again replaces its strategy. An
// Owns kind without a Child rule is a child kind with the strategy OnDelete.
func (m *Manifest) Child(gvk GVK, strategy UpdateStrategy) *Manifest {
	if !slices.Contains(m.spec.Owns, gvk) {
		m.spec.Owns = append(m.spec.Owns, gvk)
	}
	c := m.declared()
	c.Children = slices.DeleteFunc(c.Children, func(r ChildRule) bool { return r.GVK == gvk })
	c.Children = append(c.Children, ChildRule{GVK: gvk, Strategy: strategy})
	return m
}

// ChildSelector says which objects are a parent's children, for a declarative controller:
// GeneratedSelector (the default: the host labels every child with its parent's uid) or
// ParentSpecSelector (the parent's spec.selector, adopting matching orphans).
func (m *Manifest) ChildSelector(selector ChildSelector) *Manifest {
	m.declared().Selector = selector
	return m
}

func (m *Manifest) declared() *Composition {
	if m.composition == nil {
		m.composition = &Composition{}
	}
	return m.composition
}

// Watches reacts to events on another resource.
func (m *Manifest) Watches(gvk GVK, mapping Mapping) *Manifest {
	return m.WatchesSelected(gvk, mapping, "")
}

// WatchesSelected reacts to events on the objects of a resource matching a label selector.
func (m *Manifest) WatchesSelected(gvk GVK, mapping Mapping, labelSelector string) *Manifest {
	m.spec.Watches = append(m.spec.Watches, Watch{GVK: gvk, Mapping: mapping, LabelSelector: labelSelector})
	return m
}

// MetadataOnly hands the plugin only apiVersion, kind and metadata of this kind's objects (cache
// reads and MapRelated), so the host may cache just their metadata. It must be an Owns kind or
// the kind of a Watches entry; writes are unaffected.
func (m *Manifest) MetadataOnly(gvk GVK) *Manifest {
	m.spec.MetadataOnly = append(m.spec.MetadataOnly, gvk)
	return m
}

// FieldsRead is what a plugin reads of one kind (contract 0.1.5): its dotted field paths.
type FieldsRead struct {
	GVK    GVK
	Fields []string
}

// ReadsFields hands the plugin only these fields of this kind's objects (the primary kind, an
// Owns kind or the kind of a Watches entry; contract 0.1.5), each a dotted path from the
// object's top: ReadsFields(kinds.Deployment, "status.availableReplicas"). Every object of the
// kind the plugin is handed — the one it reconciles, cache reads, MapRelated's, and the answers
// of its writes — carries apiVersion, kind, metadata and, of the rest, only these fields: the
// plugin does not parse what it never reads. A path through a list keeps the list; a field
// whose name holds a dot is named by its parent. Context.Update of the kind is then refused
// (the object lacks fields): apply or patch it.
func (m *Manifest) ReadsFields(gvk GVK, fields ...string) *Manifest {
	for i := range m.spec.ReadsFields {
		if m.spec.ReadsFields[i].GVK == gvk {
			m.spec.ReadsFields[i].Fields = append(m.spec.ReadsFields[i].Fields, fields...)
			return m
		}
	}
	m.spec.ReadsFields = append(m.spec.ReadsFields, FieldsRead{GVK: gvk, Fields: slices.Clone(fields)})
	return m
}

// ServeMembers also reconciles the primaries of these member clusters (contract 0.1.4), each
// where it lives: the reads, writes and Events of a call act in its object's cluster
// (Context.Cluster names it). The plugin's identity needs the same RBAC in each.
func (m *Manifest) ServeMembers(members Members) *Manifest {
	m.spec.Clusters.Serve = members
	return m
}

// ServeLocal says whether the plugin reconciles the primaries of the host's own cluster (it does
// unless told otherwise here). A plugin must serve some cluster: ServeLocal(false) goes with
// ServeMembers.
func (m *Manifest) ServeLocal(serve bool) *Manifest {
	m.spec.Clusters.ServeLocal = serve
	return m
}

// Webhook serves an admission hook (contract 0.1.6), answered by the controller's
// CustomValidator or CustomDefaulter:
//
//	Webhook(kubewasm.MutatingWebhook("default-cronjob").For(cronJob).Operations(kubewasm.OperationCreate))
func (m *Manifest) Webhook(hook *Webhook) *Manifest {
	m.spec.Webhooks = append(m.spec.Webhooks, hook.Hook())
	return m
}

// Converts serves the conversion webhook of the custom resource of this kind (its CRD's
// versions; the version given is ignored), answered by the controller's Converter (contract
// 0.1.6).
func (m *Manifest) Converts(gvk GVK) *Manifest {
	m.spec.Conversions = append(m.spec.Conversions, gvk)
	return m
}

// ReachMembers lets the plugin read and write in these member clusters through
// Context.InCluster, reconciling nothing there (contract 0.1.4): a hub writing into members.
// When one is engaged, the host reconciles every primary once, so that it gets its objects.
func (m *Manifest) ReachMembers(members Members) *Manifest {
	m.spec.Clusters.Reach = members
	return m
}

// Finalizer names the finalizer the host adds to primaries so that Finalize runs before they
// go (the controller implements Finalizer). The host adds and removes it with a patch made as
// the plugin: the manifest grants patch on the primary for it (added when no permission has it).
func (m *Manifest) Finalizer(name string) *Manifest { m.spec.Finalizer = name; return m }

// Resync reconciles every primary at least this often; 0 disables resync.
func (m *Manifest) Resync(every time.Duration) *Manifest { m.spec.Resync = &every; return m }

// MaxConcurrency is how many keys may be reconciled at once (each in its own instance).
func (m *Manifest) MaxConcurrency(workers uint32) *Manifest {
	m.spec.MaxConcurrency = workers
	return m
}

// Limits asks for other limits; zero fields keep the host's defaults.
func (m *Manifest) Limits(limits Limits) *Manifest { m.spec.Limits = limits; return m }

// Permission grants verbs on a resource in every namespace.
func (m *Manifest) Permission(gvk GVK, verbs ...Verb) *Manifest {
	return m.Grant(gvk, "", verbs)
}

// StatusPermission grants verbs on a resource's status subresource (what ApplyStatus and
// UpdateStatus need).
func (m *Manifest) StatusPermission(gvk GVK, verbs ...Verb) *Manifest {
	return m.Grant(gvk, "status", verbs)
}

// Grant is the general form: a resource, a subresource ("" for none), verbs, and namespaces
// (none for every namespace).
func (m *Manifest) Grant(gvk GVK, subresource string, verbs []Verb, namespaces ...string) *Manifest {
	m.spec.Permissions = append(m.spec.Permissions, Permission{GVK: gvk, Subresource: subresource, Verbs: slices.Clone(verbs), Namespaces: namespaces})
	return m
}

// GrantNamed grants verbs on the named objects of a resource only (RBAC's resourceNames), in
// namespaces (empty for every namespace). Reads of such objects go to the API server.
func (m *Manifest) GrantNamed(gvk GVK, verbs []string, namespaces []string, names ...string) *Manifest {
	return m.Rule(Rule{GVK: gvk, Verbs: verbs, Namespaces: namespaces, ResourceNames: names})
}

// BindClusterRole lets the plugin create RoleBindings and ClusterRoleBindings to the
// ClusterRole name without holding its permissions itself (RBAC's bind verb).
func (m *Manifest) BindClusterRole(name string) *Manifest {
	return m.Rule(Rule{GVK: GVK{"rbac.authorization.k8s.io", "v1", "ClusterRole"}, Verbs: []string{"bind"}, ResourceNames: []string{name}})
}

// Rule is the most general grant: any subresource, any RBAC verb (get ... delete,
// deletecollection, bind, escalate, impersonate, approve, sign, use), namespaces and object
// names (empty for all).
func (m *Manifest) Rule(rule Rule) *Manifest {
	for _, v := range rule.Verbs {
		if !slices.Contains(RBACVerbs, v) {
			m.errs = append(m.errs, fmt.Sprintf("rule on %s: %q is not an RBAC verb (one of %v)", rule.GVK, v, RBACVerbs))
		}
	}
	m.spec.Rules = append(m.spec.Rules, rule)
	return m
}

// Owned are the owned kinds, each with whether the manifest grants delete on it: what the
// default Released passes to Context.DeleteControlled.
func (m *Manifest) Owned() []OwnedKind {
	out := make([]OwnedKind, len(m.spec.Owns))
	for i, g := range m.spec.Owns {
		out[i] = OwnedKind{GVK: g, MayDelete: grants(m.spec.Permissions, g, VerbDelete)}
	}
	return out
}

// OwnedKind is an owned kind and whether the plugin may delete its objects.
type OwnedKind struct {
	GVK       GVK
	MayDelete bool
}

func grants(permissions []Permission, gvk GVK, verb Verb) bool {
	for _, p := range permissions {
		if p.GVK.sameResource(gvk) && p.Subresource == "" && slices.Contains(p.Verbs, verb) {
			return true
		}
	}
	return false
}

// Spec is the manifest as the plugin describes itself to the host: what was built, plus a
// patch grant on the primary when a finalizer is set and no permission has one (the host refuses
// a finalizer without it). An error says what is wrong (no primary, a bad verb).
//
// Its Composition is what Child and ChildSelector declared, nil when neither was called; the
// Plugin's describe answers it for a Composite only (an empty one when nothing was declared).
func (m *Manifest) Spec() (ManifestSpec, error) {
	spec := m.spec
	if spec.Primary.Kind == "" || spec.Primary.Version == "" {
		return spec, fmt.Errorf("manifest: primary is not set (call .Primary(...))")
	}
	if len(m.errs) > 0 {
		return spec, fmt.Errorf("manifest: %s", m.errs[0])
	}
	if !spec.Clusters.ServeLocal && spec.Clusters.Serve.IsNone() {
		return spec, fmt.Errorf("manifest: it serves no cluster: ServeLocal(false) needs ServeMembers(...)")
	}
	if spec.Limits.Deadline < 0 || spec.Limits.Deadline.Milliseconds() > math.MaxUint32 {
		return spec, fmt.Errorf("manifest: deadline %s is out of range", spec.Limits.Deadline)
	}
	if m.composition != nil {
		spec.Composition = &Composition{Children: slices.Clone(m.composition.Children), Selector: m.composition.Selector}
	}
	if spec.Finalizer != "" && !grants(spec.Permissions, spec.Primary, VerbPatch) {
		spec.Permissions = append(slices.Clone(spec.Permissions), Permission{GVK: spec.Primary, Verbs: []Verb{VerbPatch}})
	}
	return spec, nil
}
