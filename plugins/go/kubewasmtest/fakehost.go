// Package kubewasmtest unit-tests kubewasm controllers under plain `go test`, without a cluster
// or a WebAssembly runtime:
//
//	func TestCreatesDeployment(t *testing.T) {
//		h := kubewasmtest.New(t, New, kubewasmtest.WithObjects(foo))
//		result, err := h.Reconcile(foo)
//		...
//		if got := h.Host.Applied(); got[0].Kind() != "Deployment" { ... }
//	}
//
// FakeHost stands in for the host: an in-memory object store serves the cache (of a kind the
// manifest declares metadata-only, only the metadata, as the host hands it), writes change the
// store (at once: the real cache catches up a moment later) and are recorded, Events and logs
// are recorded, and errors can be injected (Fail). Member clusters (AddMember, WithMember) are
// FakeHosts of their own, for Context.InCluster. It is deliberately simple: server-side apply
// is a deep merge, and the manifest's permissions are not enforced (`kubewasm check` and the
// real host do that; for table tests of the built component use `kubewasm test`).
//
// Harness runs a controller the way the component's exports do (kubewasm.Plugin), so a test
// exercises exactly the code the component runs; CompositeHarness (NewComposite) does the same
// for a declarative controller (a kubewasm.Composite), with writes and Events refused during its
// Customize, Sync and Finalize, as the host refuses them:
//
//	h := kubewasmtest.NewComposite(t, New)
//	got, err := h.Sync(parent, kubewasmtest.WithChildren(cm))
//	if cm, ok := got.Child(kinds.ConfigMap, "a-config"); !ok { ... }
package kubewasmtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// Call is one recorded write.
type Call struct {
	// Op is apply, apply-status, create, update, update-status, patch or delete.
	Op string
	// Object is the object sent (apply, apply-status, create, update, update-status).
	Object kubewasm.Object
	// Body is the parsed patch body (patch): a map for merge patches, a list for JSON patches.
	Body any
	// GVK, Namespace and Name name the object (for every op).
	GVK       kubewasm.GVK
	Namespace string
	Name      string
	// Force is the apply's force flag (apply, apply-status).
	Force     bool
	PatchType kubewasm.PatchType
}

// LogRecord is one recorded log record.
type LogRecord struct {
	Level   kubewasm.LogLevel
	Message string
	Fields  map[string]string
}

type storeKey struct{ group, kind, namespace, name string }

func keyOf(gvk kubewasm.GVK, namespace, name string) storeKey {
	return storeKey{gvk.Group, gvk.Kind, namespace, name}
}

// FakeHost is an in-memory kubewasm.Host for unit tests: the host's own cluster, with member
// clusters (AddMember) that are FakeHosts too, each with its own store and recorded writes.
//
// Context.InCluster(name) reads and writes in the member of that name (in the host's own
// cluster for ""). A member that was never added (or was removed) answers every call with code
// unavailable, one outside Scope with code forbidden, as the host does; Fail on a member injects
// errors there (e.g. unavailable, for a member whose API server does not answer). Events and
// logs stay with the FakeHost of the call.
type FakeHost struct {
	// Calls are the writes, in order (including failed ones).
	Calls []Call
	// Events are the published Events, in order.
	Events []kubewasm.Event
	// Logs are the log records, in order.
	Logs []LogRecord
	// MetadataOnly are the kinds the plugin reads metadata-only (Harness sets the manifest's):
	// see Handed.
	MetadataOnly []kubewasm.GVK
	// ReadsFields are the fields the plugin reads of projected kinds (Harness sets the
	// manifest's): see Answered.
	ReadsFields []kubewasm.FieldsRead
	// CacheOnly, when set, refuses every write and Event with code forbidden, the message
	// ending with it, as the host refuses them during a declarative controller's Customize, Sync
	// and Finalize (CompositeHarness sets it for those calls). Refused writes are recorded.
	CacheOnly string
	// Scope is the clusters the plugin serves and reaches (Harness sets the manifest's; the
	// host's own cluster's holds for its members): Clusters lists the members within it, and
	// InCluster refuses a member outside it with code forbidden, as the host does. Nil: every
	// member is within reach.
	Scope *kubewasm.ClusterScope
	// Labels are a member cluster's labels (AddMember sets them), which Scope's selectors match.
	Labels map[string]string

	// name is a member's name ("" for the host's own cluster), home the host's own cluster (nil
	// for it), members its members by name.
	name    string
	home    *FakeHost
	members map[string]*FakeHost

	objects  map[storeKey]kubewasm.Object
	failures map[string][]error
	nextUID  int
	nextRV   int
}

// NewFakeHost is a host whose cache holds objects.
func NewFakeHost(objects ...kubewasm.Object) *FakeHost {
	h := &FakeHost{objects: map[storeKey]kubewasm.Object{}, failures: map[string][]error{}, nextUID: 1, nextRV: 1}
	h.Add(objects...)
	return h
}

// --- setting up ---

// Add puts objects in the store (as the cache would hold them), replacing same-named ones.
// Missing uid and resourceVersion are filled in.
func (h *FakeHost) Add(objects ...kubewasm.Object) {
	for _, obj := range objects {
		stored := normalize(obj)
		if stored.UID() == "" {
			stored.SetField(h.uid(), "metadata", "uid")
		}
		if stored.ResourceVersion() == "" {
			stored.SetField(h.version(), "metadata", "resourceVersion")
		}
		h.objects[keyOf(stored.GVK(), stored.Namespace(), stored.Name())] = stored
	}
}

// Fail makes the next `times` calls of op fail with err. op is one of cache-get, cache-list,
// cache-list-controlled, apply, apply-status, create, update, update-status, patch, delete,
// publish-event.
func (h *FakeHost) Fail(op string, err error, times int) {
	for range times {
		h.failures[op] = append(h.failures[op], err)
	}
}

// Object is an object from the store (a copy), to assert on.
func (h *FakeHost) Object(gvk kubewasm.GVK, namespace, name string) (kubewasm.Object, bool) {
	stored, ok := h.objects[keyOf(gvk, namespace, name)]
	if !ok {
		return nil, false
	}
	return stored.DeepCopy(), true
}

// Objects are the stored objects of a kind, sorted by namespace then name.
func (h *FakeHost) Objects(gvk kubewasm.GVK) []kubewasm.Object {
	var out []kubewasm.Object
	for k, o := range h.objects {
		if k.group == gvk.Group && k.kind == gvk.Kind {
			out = append(out, o.DeepCopy())
		}
	}
	sortObjects(out)
	return out
}

// --- member clusters (contract 0.1.4) ---

// AddMember engages a member cluster of this name and labels whose cache holds objects, and
// returns it (a FakeHost: add objects, Fail, and read its Calls and store there). A member of
// the same name is replaced by a new, empty one.
func (h *FakeHost) AddMember(name string, labels map[string]string, objects ...kubewasm.Object) *FakeHost {
	if name == "" {
		panic(`kubewasmtest: a member cluster needs a name ("" is the host's own cluster)`)
	}
	own := h.own()
	member := NewFakeHost(objects...)
	member.name, member.home, member.Labels = name, own, maps.Clone(labels)
	if own.members == nil {
		own.members = map[string]*FakeHost{}
	}
	own.members[name] = member
	return member
}

// Member is the member cluster of this name, nil if none is engaged.
func (h *FakeHost) Member(name string) *FakeHost { return h.own().members[name] }

// RemoveMember disengages the member cluster of this name: calls there answer code unavailable.
func (h *FakeHost) RemoveMember(name string) { delete(h.own().members, name) }

// own is the host's own cluster.
func (h *FakeHost) own() *FakeHost {
	if h.home != nil {
		return h.home
	}
	return h
}

// reaches is whether the plugin serves or reaches member (Scope).
func (h *FakeHost) reaches(member *FakeHost) bool {
	scope := h.own().Scope
	return scope == nil || includes(scope.Serve, member.Labels) || includes(scope.Reach, member.Labels)
}

func includes(members kubewasm.Members, labels map[string]string) bool {
	if members.IsAll() {
		return true
	}
	selector, ok := members.Selector()
	if !ok {
		return false
	}
	matches, err := MatchLabels(labels, selector)
	return err == nil && matches
}

// Cluster is the member cluster this FakeHost is, "" for the host's own.
func (h *FakeHost) Cluster() string { return h.name }

// Clusters are the members engaged within Scope, sorted by name.
func (h *FakeHost) Clusters() []kubewasm.Cluster {
	own := h.own()
	out := []kubewasm.Cluster{}
	for _, name := range slices.Sorted(maps.Keys(own.members)) {
		member := own.members[name]
		if !own.reaches(member) {
			continue
		}
		labels := maps.Clone(member.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		out = append(out, kubewasm.Cluster{Name: name, Labels: labels})
	}
	return out
}

// InCluster is the named cluster: this FakeHost for its own name, the host's own cluster for "",
// a member, or a cluster that answers every call with code unavailable (not engaged) or
// forbidden (outside Scope), with the host's messages.
func (h *FakeHost) InCluster(name string) kubewasm.ClusterHost {
	own := h.own()
	switch {
	case name == h.name:
		return h
	case name == "":
		return own
	}
	member, ok := own.members[name]
	if !ok {
		return unreached{errorf(kubewasm.CodeUnavailable, "cluster %q is not engaged by this host now", name)}
	}
	if !own.reaches(member) {
		return unreached{errorf(kubewasm.CodeForbidden, "cluster %q is not within the plugin's clusters (its `clusters` scope)", name)}
	}
	return member
}

// unreached is a cluster every call into fails with err.
type unreached struct{ err error }

func (u unreached) CacheGet(kubewasm.GVK, string, string) (string, bool, error) {
	return "", false, u.err
}
func (u unreached) CacheList(kubewasm.GVK, string, string) ([]string, error) { return nil, u.err }
func (u unreached) Apply(string, bool) (string, error)                       { return "", u.err }
func (u unreached) ApplyStatus(string, bool) (string, error)                 { return "", u.err }
func (u unreached) Create(string) (string, error)                            { return "", u.err }
func (u unreached) Update(string) (string, error)                            { return "", u.err }
func (u unreached) UpdateStatus(string) (string, error)                      { return "", u.err }
func (u unreached) Patch(kubewasm.GVK, string, string, kubewasm.PatchType, string) (string, error) {
	return "", u.err
}
func (u unreached) Delete(kubewasm.GVK, string, string) error { return u.err }

// --- what happened ---

// Writes are the recorded writes of one op ("" for all).
func (h *FakeHost) Writes(op string) []Call {
	var out []Call
	for _, c := range h.Calls {
		if op == "" || c.Op == op {
			out = append(out, c)
		}
	}
	return out
}

// Applied are the objects sent to Apply, in order.
func (h *FakeHost) Applied() []kubewasm.Object { return h.sent("apply") }

// StatusApplied are the objects sent to ApplyStatus, in order.
func (h *FakeHost) StatusApplied() []kubewasm.Object { return h.sent("apply-status") }

func (h *FakeHost) sent(op string) []kubewasm.Object {
	var out []kubewasm.Object
	for _, c := range h.Writes(op) {
		out = append(out, c.Object)
	}
	return out
}

// Reset forgets the recorded calls, Events and logs, its members' too (the stores stay).
func (h *FakeHost) Reset() {
	h.Calls, h.Events, h.Logs = nil, nil, nil
	for _, member := range h.members {
		member.Reset()
	}
}

// Handed is obj as the host hands it to the plugin (cache reads, MapRelated): of a kind in
// MetadataOnly (the host's own cluster's, in a member too), only its apiVersion, kind and
// metadata (without managedFields). Not a copy: it shares obj's values.
func (h *FakeHost) Handed(gvk kubewasm.GVK, obj kubewasm.Object) kubewasm.Object {
	if !slices.Contains(h.own().MetadataOnly, gvk) {
		return h.Answered(gvk, obj)
	}
	return metadataOf(obj)
}

// Answered is obj as the host hands it in a request or a write's answer: of a kind in
// ReadsFields (the host's own cluster's, in a member too), its apiVersion, kind, metadata
// (without managedFields) and, of the rest, those fields alone; a path through a value that is
// not an object keeps that value whole. Not a copy: it shares obj's values.
func (h *FakeHost) Answered(gvk kubewasm.GVK, obj kubewasm.Object) kubewasm.Object {
	i := slices.IndexFunc(h.own().ReadsFields, func(r kubewasm.FieldsRead) bool { return r.GVK == gvk })
	if i < 0 {
		return obj
	}
	// A name's subtree, or nil to keep its whole value.
	tree := map[string]any{}
	for _, path := range h.own().ReadsFields[i].Fields {
		names := strings.Split(path, ".")
		node, whole := tree, false
		for _, name := range names[:len(names)-1] {
			child, seen := node[name]
			if seen && child == nil {
				whole = true
				break
			}
			if !seen {
				child = map[string]any{}
				node[name] = child
			}
			node = child.(map[string]any)
		}
		if !whole {
			node[names[len(names)-1]] = nil
		}
	}
	var within func(value any, sub any) any
	within = func(value any, sub any) any {
		members, isObject := value.(map[string]any)
		if sub == nil || !isObject {
			return value
		}
		out := map[string]any{}
		for name, s := range sub.(map[string]any) {
			if v, ok := members[name]; ok {
				out[name] = within(v, s)
			}
		}
		return out
	}
	head := metadataOf(obj)
	for name, sub := range tree {
		if v, ok := obj[name]; ok && name != "apiVersion" && name != "kind" && name != "metadata" {
			head[name] = within(v, sub)
		}
	}
	return head
}

// metadataOf is what the host hands of an object of a metadata-only kind.
func metadataOf(obj kubewasm.Object) kubewasm.Object {
	head := kubewasm.Object{}
	for _, field := range []string{"apiVersion", "kind", "metadata"} {
		if v, ok := obj[field]; ok {
			head[field] = v
		}
	}
	if meta := obj.Map("metadata"); meta != nil {
		// A new map: the stored object keeps its managedFields.
		meta = maps.Clone(meta)
		delete(meta, "managedFields")
		head["metadata"] = meta
	}
	return head
}

// --- the kubewasm.Host interface ---

func (h *FakeHost) uid() string { h.nextUID++; return fmt.Sprintf("uid-%d", h.nextUID-1) }

func (h *FakeHost) version() string { h.nextRV++; return strconv.Itoa(h.nextRV - 1) }

// refuse is the forbidden error of a write or Event while CacheOnly is set (on the host's own
// cluster: it holds in every member), as the host words it.
func (h *FakeHost) refuse(what string) error {
	cacheOnly := h.own().CacheOnly
	if cacheOnly == "" {
		return nil
	}
	return errorf(kubewasm.CodeForbidden, "%s refused: %s", what, cacheOnly)
}

// refuseWrite is refuse of a write with the verb the host checks it as.
func (h *FakeHost) refuseWrite(verb string, gvk kubewasm.GVK) error {
	return h.refuse(verb + " " + gvk.String())
}

func (h *FakeHost) maybeFail(op string) error {
	if queue := h.failures[op]; len(queue) > 0 {
		h.failures[op] = queue[1:]
		return queue[0]
	}
	return nil
}

func errorf(code kubewasm.ErrorCode, format string, args ...any) error {
	return kubewasm.NewError(code, format, args...)
}

// normalize is a deep copy of obj with numbers as json.Number, as the SDK parses them.
func normalize(obj kubewasm.Object) kubewasm.Object {
	text, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("kubewasmtest: object is not JSON: %v", err))
	}
	parsed, err := kubewasm.ParseObject(text)
	if err != nil {
		panic(err)
	}
	return parsed
}

func parseObject(text string) (kubewasm.Object, error) {
	obj, err := kubewasm.ParseObject([]byte(text))
	if err != nil {
		return nil, errorf(kubewasm.CodeInvalid, "bad JSON: %v", err)
	}
	if obj.APIVersion() == "" || obj.Kind() == "" || obj.Name() == "" {
		return nil, errorf(kubewasm.CodeInvalid, "the object must name its apiVersion, kind and metadata.name")
	}
	return obj, nil
}

func dump(obj kubewasm.Object) string {
	text, _ := json.Marshal(obj)
	return string(text)
}

func (h *FakeHost) store(obj kubewasm.Object, isNew, specChanged bool) string {
	if isNew {
		if obj.UID() == "" {
			obj.SetField(h.uid(), "metadata", "uid")
		}
		if _, ok := obj.Field("metadata", "generation"); !ok {
			obj.SetField(json.Number("1"), "metadata", "generation")
		}
	} else if specChanged {
		obj.SetField(json.Number(strconv.FormatInt(max(obj.Generation(), 1)+1, 10)), "metadata", "generation")
	}
	obj.SetField(h.version(), "metadata", "resourceVersion")
	h.objects[keyOf(obj.GVK(), obj.Namespace(), obj.Name())] = obj
	return dump(h.Answered(obj.GVK(), obj))
}

func (h *FakeHost) CacheGet(gvk kubewasm.GVK, namespace, name string) (string, bool, error) {
	if err := h.maybeFail("cache-get"); err != nil {
		return "", false, err
	}
	stored, ok := h.objects[keyOf(gvk, namespace, name)]
	if !ok {
		return "", false, nil
	}
	return dump(h.Handed(gvk, stored)), true, nil
}

func (h *FakeHost) CacheList(gvk kubewasm.GVK, namespace, labelSelector string) ([]string, error) {
	if err := h.maybeFail("cache-list"); err != nil {
		return nil, err
	}
	found, err := h.list(gvk, namespace, labelSelector)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(found))
	for i, o := range found {
		out[i] = dump(h.Handed(gvk, o))
	}
	return out, nil
}

// CacheListControlled is the stored objects of a kind in namespace ("" for all) whose
// controller owner reference (controller: true) has the uid owner, sorted by namespace then
// name, as the host hands them (Handed).
func (h *FakeHost) CacheListControlled(gvk kubewasm.GVK, namespace, owner string) ([]string, error) {
	if err := h.maybeFail("cache-list-controlled"); err != nil {
		return nil, err
	}
	found, err := h.list(gvk, namespace, "")
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, o := range found {
		if ref, ok := o.ControllerRef(); ok && ref.UID == owner {
			out = append(out, dump(h.Handed(gvk, o)))
		}
	}
	return out, nil
}

// list is the stored objects of a kind in namespace ("" for all) matching a label selector,
// sorted by namespace then name: not copies.
func (h *FakeHost) list(gvk kubewasm.GVK, namespace, labelSelector string) ([]kubewasm.Object, error) {
	var found []kubewasm.Object
	for k, o := range h.objects {
		if k.group != gvk.Group || k.kind != gvk.Kind || (namespace != "" && k.namespace != namespace) {
			continue
		}
		ok, err := MatchLabels(o.Labels(), labelSelector)
		if err != nil {
			return nil, err
		}
		if ok {
			found = append(found, o)
		}
	}
	sortObjects(found)
	return found, nil
}

func sortObjects(objs []kubewasm.Object) {
	slices.SortFunc(objs, func(a, b kubewasm.Object) int {
		return cmp.Or(strings.Compare(a.Namespace(), b.Namespace()), strings.Compare(a.Name(), b.Name()))
	})
}

func (h *FakeHost) record(op string, obj kubewasm.Object, force bool) {
	h.Calls = append(h.Calls, Call{Op: op, Object: obj.DeepCopy(), GVK: obj.GVK(), Namespace: obj.Namespace(), Name: obj.Name(), Force: force})
}

func notFound(obj kubewasm.Object) error {
	return errorf(kubewasm.CodeNotFound, "%s %s not found", obj.GVK(), obj.Key())
}

func (h *FakeHost) Apply(text string, force bool) (string, error) {
	obj, err := parseObject(text)
	if err != nil {
		return "", err
	}
	h.record("apply", obj, force)
	if err := h.refuseWrite("patch", obj.GVK()); err != nil {
		return "", err
	}
	if err := h.maybeFail("apply"); err != nil {
		return "", err
	}
	current, ok := h.objects[keyOf(obj.GVK(), obj.Namespace(), obj.Name())]
	if !ok {
		return h.store(obj.DeepCopy(), true, true), nil
	}
	patch := obj.DeepCopy()
	delete(patch, "status")
	merged := merge(current.DeepCopy(), patch, false)
	return h.store(merged, false, !reflect.DeepEqual(merged["spec"], current["spec"])), nil
}

func (h *FakeHost) ApplyStatus(text string, force bool) (string, error) {
	obj, err := parseObject(text)
	if err != nil {
		return "", err
	}
	h.record("apply-status", obj, force)
	if err := h.refuseWrite("patch", obj.GVK()); err != nil {
		return "", err
	}
	if err := h.maybeFail("apply-status"); err != nil {
		return "", err
	}
	current, ok := h.objects[keyOf(obj.GVK(), obj.Namespace(), obj.Name())]
	if !ok {
		return "", notFound(obj)
	}
	merged := current.DeepCopy()
	status, _ := merged["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
	}
	newStatus, _ := obj["status"].(map[string]any)
	merged["status"] = merge(status, newStatus, false)
	return h.store(merged, false, false), nil
}

func (h *FakeHost) Create(text string) (string, error) {
	obj, err := parseObject(text)
	if err != nil {
		return "", err
	}
	h.record("create", obj, false)
	if err := h.refuseWrite("create", obj.GVK()); err != nil {
		return "", err
	}
	if err := h.maybeFail("create"); err != nil {
		return "", err
	}
	if _, ok := h.objects[keyOf(obj.GVK(), obj.Namespace(), obj.Name())]; ok {
		return "", errorf(kubewasm.CodeAlreadyExists, "%s %s already exists", obj.GVK(), obj.Key())
	}
	return h.store(obj.DeepCopy(), true, true), nil
}

func (h *FakeHost) replace(op, text string, statusOnly bool) (string, error) {
	obj, err := parseObject(text)
	if err != nil {
		return "", err
	}
	h.record(op, obj, false)
	if err := h.refuseWrite("update", obj.GVK()); err != nil {
		return "", err
	}
	if i := slices.IndexFunc(h.own().ReadsFields, func(r kubewasm.FieldsRead) bool { return r.GVK == obj.GVK() }); i >= 0 {
		what := "the whole"
		if statusOnly {
			what = "the status of"
		}
		if !statusOnly || !slices.Contains(h.own().ReadsFields[i].Fields, "status") {
			return "", errorf(kubewasm.CodeInvalid, "update replaces %s %s, and the plugin is handed projected objects of it (ReadsFields): write it with apply or patch", what, obj.GVK())
		}
	}
	if err := h.maybeFail(op); err != nil {
		return "", err
	}
	current, ok := h.objects[keyOf(obj.GVK(), obj.Namespace(), obj.Name())]
	if !ok {
		return "", notFound(obj)
	}
	if obj.ResourceVersion() != current.ResourceVersion() {
		return "", errorf(kubewasm.CodeConflict, "%s %s: the object has been modified", obj.GVK(), obj.Key())
	}
	var next kubewasm.Object
	if statusOnly {
		next = current.DeepCopy()
		next["status"] = obj.DeepCopy()["status"]
	} else {
		next = obj.DeepCopy()
		next.SetField(current.UID(), "metadata", "uid")
		if g, ok := current.Field("metadata", "generation"); ok {
			next.SetField(g, "metadata", "generation")
		}
		if s, ok := current["status"]; ok {
			next["status"] = kubewasm.Object{"s": s}.DeepCopy()["s"]
		}
	}
	return h.store(next, false, !statusOnly && !reflect.DeepEqual(next["spec"], current["spec"])), nil
}

func (h *FakeHost) Update(text string) (string, error) { return h.replace("update", text, false) }

func (h *FakeHost) UpdateStatus(text string) (string, error) {
	return h.replace("update-status", text, true)
}

func (h *FakeHost) Patch(gvk kubewasm.GVK, namespace, name string, patchType kubewasm.PatchType, body string) (string, error) {
	var parsed any
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&parsed); err != nil {
		return "", errorf(kubewasm.CodeInvalid, "bad JSON patch body: %v", err)
	}
	h.Calls = append(h.Calls, Call{Op: "patch", Body: parsed, GVK: gvk, Namespace: namespace, Name: name, PatchType: patchType})
	if err := h.refuseWrite("patch", gvk); err != nil {
		return "", err
	}
	if err := h.maybeFail("patch"); err != nil {
		return "", err
	}
	current, ok := h.objects[keyOf(gvk, namespace, name)]
	if !ok {
		return "", errorf(kubewasm.CodeNotFound, "%s %s not found", gvk, kubewasm.ObjectKey{Namespace: namespace, Name: name})
	}
	var next kubewasm.Object
	if patchType == kubewasm.JSONPatch {
		ops, ok := parsed.([]any)
		if !ok {
			return "", errorf(kubewasm.CodeInvalid, "a JSON patch is a list of operations")
		}
		var err error
		if next, err = jsonPatch(current.DeepCopy(), ops); err != nil {
			return "", err
		}
	} else {
		patch, ok := parsed.(map[string]any)
		if !ok {
			return "", errorf(kubewasm.CodeInvalid, "a merge patch is an object")
		}
		if rv, ok := kubewasm.Object(patch).String("metadata", "resourceVersion"); ok && rv != current.ResourceVersion() {
			return "", errorf(kubewasm.CodeConflict, "%s %s: the object has been modified", gvk, kubewasm.ObjectKey{Namespace: namespace, Name: name})
		}
		next = merge(current.DeepCopy(), patch, true)
	}
	return h.store(next, false, !reflect.DeepEqual(next["spec"], current["spec"])), nil
}

func (h *FakeHost) Delete(gvk kubewasm.GVK, namespace, name string) error {
	h.Calls = append(h.Calls, Call{Op: "delete", GVK: gvk, Namespace: namespace, Name: name})
	if err := h.refuseWrite("delete", gvk); err != nil {
		return err
	}
	if err := h.maybeFail("delete"); err != nil {
		return err
	}
	k := keyOf(gvk, namespace, name)
	if _, ok := h.objects[k]; !ok {
		return errorf(kubewasm.CodeNotFound, "%s %s not found", gvk, kubewasm.ObjectKey{Namespace: namespace, Name: name})
	}
	delete(h.objects, k)
	return nil
}

func (h *FakeHost) PublishEvent(event kubewasm.Event) error {
	if err := h.refuse("an Event"); err != nil {
		return err
	}
	if err := h.maybeFail("publish-event"); err != nil {
		return err
	}
	h.Events = append(h.Events, event)
	return nil
}

func (h *FakeHost) Log(level kubewasm.LogLevel, message string, fields []kubewasm.LogField) {
	m := make(map[string]string, len(fields))
	for _, f := range fields {
		m[f.Key] = f.Value
	}
	h.Logs = append(h.Logs, LogRecord{Level: level, Message: message, Fields: m})
}

var _ kubewasm.Host = (*FakeHost)(nil)

// --- patches ---

// merge deep-merges patch into into (RFC 7386 when deleteNulls): maps merge, anything else
// replaces.
func merge(into map[string]any, patch map[string]any, deleteNulls bool) map[string]any {
	for k, v := range patch {
		if v == nil && deleteNulls {
			delete(into, k)
			continue
		}
		if m, ok := v.(map[string]any); ok {
			base, _ := into[k].(map[string]any)
			if base == nil {
				base = map[string]any{}
			}
			into[k] = merge(base, m, deleteNulls)
			continue
		}
		into[k] = kubewasm.Object{"v": v}.DeepCopy()["v"]
	}
	return into
}

func pointer(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, errorf(kubewasm.CodeInvalid, "JSON patch path %q must start with /", path)
	}
	steps := strings.Split(path[1:], "/")
	for i, s := range steps {
		steps[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return steps, nil
}

// jsonPatch applies RFC 6902 operations add, remove, replace and test (move and copy are left
// out).
func jsonPatch(doc kubewasm.Object, ops []any) (kubewasm.Object, error) {
	for _, raw := range ops {
		op, ok := raw.(map[string]any)
		if !ok {
			return nil, errorf(kubewasm.CodeInvalid, "a JSON patch operation is an object")
		}
		path, _ := op["path"].(string)
		steps, err := pointer(path)
		if err != nil {
			return nil, err
		}
		if len(steps) == 0 {
			return nil, errorf(kubewasm.CodeInvalid, "JSON patch on the whole document is not supported")
		}
		var parent any = map[string]any(doc)
		for _, step := range steps[:len(steps)-1] {
			switch p := parent.(type) {
			case map[string]any:
				parent = p[step]
			case []any:
				i, err := strconv.Atoi(step)
				if err != nil || i < 0 || i >= len(p) {
					return nil, errorf(kubewasm.CodeInvalid, "JSON patch path %q does not exist", path)
				}
				parent = p[i]
			default:
				parent = nil
			}
			if parent == nil {
				return nil, errorf(kubewasm.CodeInvalid, "JSON patch path %q does not exist", path)
			}
		}
		last := steps[len(steps)-1]
		value := op["value"]
		kind, _ := op["op"].(string)
		switch p := parent.(type) {
		case map[string]any:
			current, exists := p[last]
			switch kind {
			case "test":
				if !reflect.DeepEqual(current, value) {
					return nil, errorf(kubewasm.CodeInvalid, "JSON patch test failed at %q", path)
				}
			case "add":
				p[last] = value
			case "replace":
				if !exists {
					return nil, errorf(kubewasm.CodeInvalid, "JSON patch replace of missing %q", path)
				}
				p[last] = value
			case "remove":
				if !exists {
					return nil, errorf(kubewasm.CodeInvalid, "JSON patch remove of missing %q", path)
				}
				delete(p, last)
			default:
				return nil, errorf(kubewasm.CodeInvalid, "JSON patch op %q is not supported by FakeHost", kind)
			}
		case []any:
			// Lists are changed in place through their parent: find who holds p.
			updated, err := patchList(p, kind, last, value, path)
			if err != nil {
				return nil, err
			}
			if err := setAt(doc, steps[:len(steps)-1], updated); err != nil {
				return nil, err
			}
		default:
			return nil, errorf(kubewasm.CodeInvalid, "JSON patch path %q does not exist", path)
		}
	}
	return doc, nil
}

func patchList(list []any, kind, last string, value any, path string) ([]any, error) {
	if last == "-" && kind == "add" {
		return append(list, value), nil
	}
	i, err := strconv.Atoi(last)
	if err != nil || i < 0 || i > len(list) || (kind != "add" && i == len(list)) {
		return nil, errorf(kubewasm.CodeInvalid, "JSON patch path %q does not exist", path)
	}
	switch kind {
	case "test":
		if !reflect.DeepEqual(list[i], value) {
			return nil, errorf(kubewasm.CodeInvalid, "JSON patch test failed at %q", path)
		}
		return list, nil
	case "add":
		return slices.Insert(list, i, value), nil
	case "replace":
		list[i] = value
		return list, nil
	case "remove":
		return slices.Delete(list, i, i+1), nil
	}
	return nil, errorf(kubewasm.CodeInvalid, "JSON patch op %q is not supported by FakeHost", kind)
}

func setAt(doc kubewasm.Object, steps []string, value any) error {
	var parent any = map[string]any(doc)
	for i, step := range steps {
		lastStep := i == len(steps)-1
		switch p := parent.(type) {
		case map[string]any:
			if lastStep {
				p[step] = value
				return nil
			}
			parent = p[step]
		case []any:
			n, _ := strconv.Atoi(step)
			if lastStep {
				p[n] = value
				return nil
			}
			parent = p[n]
		}
	}
	return nil
}
