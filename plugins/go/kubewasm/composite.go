package kubewasm

import (
	"fmt"
	"strings"
	"time"
)

// UpdateStrategy is what the host does with an existing child whose desired state changed (the
// WIT's composite.update-strategy).
type UpdateStrategy uint8

const (
	// OnDelete: nothing; an existing child is never updated, and a child that is gone is
	// created again as desired (Metacontroller's default; an Owns kind without a Child rule).
	OnDelete UpdateStrategy = iota
	// Recreate: the host deletes it and creates it as desired once it is gone. Decided on the
	// desired state alone: a child someone else changed is not recreated until the desired
	// state changes.
	Recreate
	// InPlace: the host server-side applies the desired state over it, also when someone else
	// changed a field the desired state sets (fields it leaves out are theirs).
	InPlace
)

func (s UpdateStrategy) String() string {
	switch s {
	case OnDelete:
		return "on-delete"
	case Recreate:
		return "recreate"
	case InPlace:
		return "in-place"
	}
	return fmt.Sprintf("update-strategy(%d)", uint8(s))
}

// ChildSelector says which objects are a parent's children to claim (the WIT's
// composite.child-selector).
type ChildSelector uint8

const (
	// GeneratedSelector (the default): the host labels every child
	// kubewasm.io/controller-uid: <parent uid> and selects by that label.
	GeneratedSelector ChildSelector = iota
	// ParentSpecSelector: the parent's spec.selector (matchLabels, matchExpressions); the host
	// adopts matching orphans and releases children that stop matching. A parent without one
	// fails its sync with invalid.
	ParentSpecSelector
)

func (s ChildSelector) String() string {
	switch s {
	case GeneratedSelector:
		return "generated"
	case ParentSpecSelector:
		return "parent-spec-selector"
	}
	return fmt.Sprintf("child-selector(%d)", uint8(s))
}

// ChildRule is one child kind and its update strategy.
type ChildRule struct {
	GVK      GVK
	Strategy UpdateStrategy
}

// Composition is how a declarative controller's parents and children relate: what the
// composite export's describe-composition answers (Manifest.Child, Manifest.ChildSelector).
type Composition struct {
	Children []ChildRule
	Selector ChildSelector
}

// Composite is a declarative controller plugin, Metacontroller's CompositeController in process:
// for a parent object (the manifest's primary) and the children it owns (the manifest's Child
// kinds), Sync answers which children should exist and what the parent's status is, and the
// host does the rest — claims children, server-side applies what is missing or changed (per
// the kind's UpdateStrategy), prunes what is no longer answered (only once every apply
// succeeded), and replaces the parent's status (with observedGeneration) when the answer has
// one.
//
// Export it with ExportComposite. It is built and described as a Controller is (settings, the
// constructor, Manifest), and may also implement Customizer and CompositeFinalizer.
//
// Sync, Customize and Finalize may read the cache and log through ctx, nothing else: the host
// refuses every client and Event call with forbidden (it makes every write from the answer).
// An error retries the parent with backoff and a Warning Event (none for conflict), and the host
// changes nothing; a panic is a fault, as in a Controller.
type Composite interface {
	// Manifest names the parent kind (Primary), the child kinds (Child) and what else the
	// plugin needs.
	Manifest() *Manifest
	// Sync answers the children and status req.Parent should have. The answer is the whole
	// desired state: a child it leaves out is deleted.
	Sync(ctx *Context, req *SyncRequest) (*SyncResponse, error)
}

// Customizer is a Composite whose parents depend on objects besides their children: Customize
// names them (at most 100 rules), and the host hands the objects they select in
// SyncRequest.Related, and syncs the parent again when one of them changes. Asked once per
// parent and metadata.generation. Without it, a parent has no related objects.
type Customizer interface {
	Customize(ctx *Context, parent Object) ([]RelatedRule, error)
}

// CompositeFinalizer is a Composite with a finalizer (Manifest.Finalizer): Finalize answers for
// a parent being deleted, typically no children (the host deletes them) and Finalized once
// external cleanup is done. Without it, Finalize answers no children and Finalized.
type CompositeFinalizer interface {
	Finalize(ctx *Context, req *SyncRequest) (*SyncResponse, error)
}

// RelatedRule selects objects of one kind that a parent depends on: by Names (in Namespace,
// or any namespace when ""), or by LabelSelector (in Namespace, or every namespace), or every
// object (in Namespace) when neither is given; Names and LabelSelector together are invalid. The
// kind must be readable from the cache: a Watches kind (ByMapRelated: the host maps its events
// to the parents whose rules select the object) or one the manifest grants list on.
type RelatedRule struct {
	GVK GVK
	// Namespace is at most 63 bytes; "" for any namespace.
	Namespace string
	// Names are at most 100, each at most 253 bytes.
	Names []string
	// LabelSelector is Kubernetes label selector syntax, at most 4096 bytes; "" for none.
	LabelSelector string
}

// RelatedNamed selects the objects of a kind named names, in namespace ("" for any).
func RelatedNamed(gvk GVK, namespace string, names ...string) RelatedRule {
	return RelatedRule{GVK: gvk, Namespace: namespace, Names: names}
}

// RelatedSelected selects the objects of a kind matching a label selector ("" for every
// object), in namespace ("" for every namespace).
func RelatedSelected(gvk GVK, namespace, labelSelector string) RelatedRule {
	return RelatedRule{GVK: gvk, Namespace: namespace, LabelSelector: labelSelector}
}

// Objects are objects of one kind: one entry of a SyncRequest's children or related objects.
type Objects struct {
	GVK   GVK
	Items []Object
}

// SyncRequest is one parent, what it has, and what it asked for: what Sync and Finalize get.
type SyncRequest struct {
	// Parent is the parent as the cache holds it (a copy).
	Parent Object
	// Finalizing is whether the parent is being deleted (a Finalize call).
	Finalizing bool

	children []Objects
	related  []Objects
}

// NewSyncRequest is a request as the host would make it, for calling Sync in a unit test
// (kubewasmtest's harness makes them too): children one entry per child kind, related one entry
// per Customize rule.
func NewSyncRequest(parent Object, children, related []Objects, finalizing bool) *SyncRequest {
	return &SyncRequest{Parent: parent, Finalizing: finalizing, children: children, related: related}
}

// Children are the parent's claimed children of a kind (any version of its group and kind),
// sorted by namespace and name; nil when it has none.
func (r *SyncRequest) Children(gvk GVK) []Object { return of(r.children, gvk) }

// Related are the objects of a kind that the parent's Customize rules selected, over every rule
// that named the kind, in rule order; nil when there are none.
func (r *SyncRequest) Related(gvk GVK) []Object { return of(r.related, gvk) }

func of(groups []Objects, gvk GVK) []Object {
	var out []Object
	for _, g := range groups {
		if g.GVK.sameResource(gvk) {
			out = append(out, g.Items...)
		}
	}
	return out
}

// SyncResponse is what should be: the answer of Sync and Finalize.
type SyncResponse struct {
	// Status is the parent's whole status, a JSON object: an Object, a map, a struct with json
	// tags (or JSON text); the host replaces the status with it, observedGeneration set. nil
	// leaves the status as it is (for a parent whose status others own, such as a built-in
	// kind).
	Status any
	// Children are every child that should exist, whole (apiVersion, kind, metadata.name, and
	// metadata.namespace where it differs from the parent's): Objects, structs with json tags,
	// k8s.io/api objects (or JSON text). The owner reference, the selector's label and the
	// kubewasm.io/applied annotation are the host's to add. At most 1000; each object at most
	// 3 MiB of JSON, all of them and the status together at most 32 MiB (more is a fault).
	Children []any
	// ResyncAfter syncs the parent again after this long even if nothing changes (whole
	// milliseconds, rounded up; under a second it is rate limited like a failure). 0 for none.
	ResyncAfter time.Duration
	// Finalized, from Finalize only: the finalizer may go (the host removes it once the
	// children answered are managed). Until then the host calls Finalize again on the next
	// event or after ResyncAfter (5 seconds when 0).
	Finalized bool
}

// --- the plugin side: what the composite export runs ---

// ExportComposite makes newComposite the plugin's constructor, for a declarative controller:
// call it from the main package's init, instead of Export.
//
//	func init() { kubewasm.ExportComposite(New) }
//	func New(s Settings) (*Composite, error) { ... }
//	func main() {}
//
// Settings are decoded as for Export; an error from newComposite refuses to load the plugin.
func ExportComposite[S any, C Composite](newComposite func(settings S) (C, error)) {
	export(compositeFactory(newComposite))
}

func compositeFactory[S any, C Composite](newComposite func(S) (C, error)) *factory {
	return &factory{declarative: true, build: func(text string) (described, error) {
		settings, err := DecodeSettings[S](text)
		if err != nil {
			return nil, err
		}
		c, err := newComposite(settings)
		if err != nil {
			return nil, err
		}
		return c, nil
	}}
}

// NewCompositePlugin is a plugin of the declarative controller newComposite builds, calling
// host.
func NewCompositePlugin[S any, C Composite](newComposite func(S) (C, error), host Host) *Plugin {
	return &Plugin{factory: compositeFactory(newComposite), host: host}
}

// MethodSync names a Plugin.CallComposite of Sync (MethodFinalize: of Finalize).
const MethodSync Method = "sync"

// RawObjects are objects of one kind as the host hands them: JSON text.
type RawObjects struct {
	GVK   GVK
	Items []string
}

// RawSyncRequest is a sync request as the host makes it: the parent and the objects as JSON
// text.
type RawSyncRequest struct {
	Parent     string
	Children   []RawObjects
	Related    []RawObjects
	Finalizing bool
}

// RawSyncResponse is a SyncResponse as the host gets it.
type RawSyncResponse struct {
	// Status is the status's JSON text, "" for none.
	Status   string
	Children []string
	// ResyncAfter is in whole milliseconds, 0 for none.
	ResyncAfter uint64
	Finalized   bool
}

// wrongKind is the panic of a call the host never makes to this kind of plugin: the component
// traps on it.
type wrongKind string

func (w wrongKind) String() string { return string(w) }

// Composition is what the composite export's describe-composition answers, right after
// Describe: the declarative controller's, nil for a Controller (or before Describe).
func (p *Plugin) Composition() *Composition { return p.spec.Composition }

// Composite is the declarative controller Describe built (nil before, and for a Controller).
func (p *Plugin) Composite() Composite { return p.composite }

// Declarative is whether the plugin is a Composite's (ExportComposite, NewCompositePlugin).
func (p *Plugin) Declarative() bool { return p.factory != nil && p.factory.declarative }

// composing is the error of a composite call before describe, and the panic (a trap in the
// component) of one to a Controller's plugin.
func (p *Plugin) composing(what string) error {
	if p.composite != nil {
		return nil
	}
	if p.controller != nil {
		panic(wrongKind(what + " called on a controller that reconciles itself: the host never calls it for one"))
	}
	return &Error{Code: CodeOther, Message: "the host called the plugin before describe"}
}

// Customize runs the Composite's Customize on the parent (JSON text): no rules without a
// Customizer. A failure is an *Error as the host gets it; a panic is not recovered (see Call).
func (p *Plugin) Customize(parent string) ([]RelatedRule, error) {
	if err := p.composing("customize"); err != nil {
		return nil, err
	}
	parsed, err := parseObject(parent)
	if err != nil {
		return nil, &Error{Code: CodeInvalid, Message: "the parent does not parse: " + err.Error()}
	}
	customizer, ok := p.composite.(Customizer)
	if !ok {
		return []RelatedRule{}, nil
	}
	rules, err := customizer.Customize(p.context(parsed.Key(), 0), parsed)
	if err != nil {
		return nil, asError(err)
	}
	return rules, nil
}

// CallComposite runs the Composite's Sync (MethodSync) or Finalize (MethodFinalize: the default
// answers Finalized and no children) on req, and returns the answer as the host gets it. A
// failure is an *Error as the host gets it (an answer that does not encode is invalid); a panic
// is not recovered (see Call).
func (p *Plugin) CallComposite(method Method, req RawSyncRequest) (RawSyncResponse, error) {
	if err := p.composing(string(method)); err != nil {
		return RawSyncResponse{}, err
	}
	request, err := parseSyncRequest(req)
	if err != nil {
		return RawSyncResponse{}, err
	}
	ctx := p.context(request.Parent.Key(), 0)
	var response *SyncResponse
	switch method {
	case MethodSync:
		response, err = p.composite.Sync(ctx, request)
	case MethodFinalize:
		if f, ok := p.composite.(CompositeFinalizer); ok {
			response, err = f.Finalize(ctx, request)
		} else {
			response = &SyncResponse{Finalized: true}
		}
	default:
		return RawSyncResponse{}, &Error{Code: CodeOther, Message: "unknown method " + string(method)}
	}
	if err != nil {
		return RawSyncResponse{}, asError(err)
	}
	// An answer that is not one is a bug, not an answer: it traps, as a panic does (every SDK).
	if response == nil {
		panic(fmt.Sprintf("%s returned neither a response nor an error", method))
	}
	return encodeResponse(response, p.kinds), nil
}

func parseSyncRequest(req RawSyncRequest) (*SyncRequest, error) {
	parent, err := parseObject(req.Parent)
	if err != nil {
		return nil, &Error{Code: CodeInvalid, Message: "the parent does not parse: " + err.Error()}
	}
	children, err := parseGroups(req.Children, "child")
	if err != nil {
		return nil, err
	}
	related, err := parseGroups(req.Related, "related object")
	if err != nil {
		return nil, err
	}
	return NewSyncRequest(parent, children, related, req.Finalizing), nil
}

func parseGroups(groups []RawObjects, what string) ([]Objects, error) {
	out := make([]Objects, len(groups))
	for i, g := range groups {
		items := make([]Object, len(g.Items))
		for j, text := range g.Items {
			obj, err := parseObject(text)
			if err != nil {
				return nil, &Error{Code: CodeInvalid, Message: fmt.Sprintf("a %s %s does not parse: %v", g.GVK.Kind, what, err)}
			}
			items[j] = obj
		}
		out[i] = Objects{GVK: g.GVK, Items: items}
	}
	return out, nil
}

// objectText is v's JSON text (a string or []byte is taken as it is, anything else encoded by
// encode), which must be an object; ok is false for null.
func objectText(v any, encode func(any) ([]byte, error)) (text string, ok bool, err error) {
	switch v := v.(type) {
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		encoded, merr := encode(v)
		if merr != nil {
			return "", false, merr
		}
		text = string(encoded)
	}
	switch trimmed := strings.TrimSpace(text); {
	case strings.HasPrefix(trimmed, "{"):
		return text, true, nil
	case trimmed == "null":
		return "", false, nil
	}
	return "", false, errNotAnObject
}

// encodeResponse is the answer as the host takes it, typed children given their kinds' TypeMeta;
// one that cannot be (a status or child that is not a JSON object) panics: a bug in the plugin,
// which traps.
func encodeResponse(r *SyncResponse, kinds declaredKinds) RawSyncResponse {
	out := RawSyncResponse{Children: make([]string, len(r.Children)), Finalized: r.Finalized}
	if r.Status != nil {
		text, _, err := objectText(r.Status, marshal)
		if err != nil {
			panic("the status: " + err.Error())
		}
		out.Status = text
	}
	for i, child := range r.Children {
		text, ok, err := objectText(child, kinds.encodeObject)
		if err == nil && !ok {
			err = errNotAnObject
		}
		if err != nil {
			panic(fmt.Sprintf("children[%d]: %v", i, err))
		}
		out.Children[i] = text
	}
	if r.ResyncAfter > 0 {
		out.ResyncAfter = requeueMillis(r.ResyncAfter)
	}
	return out
}
