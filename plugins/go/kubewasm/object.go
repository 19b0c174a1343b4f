package kubewasm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Object is a Kubernetes object as parsed JSON: apiVersion, kind, metadata and the rest, like
// client-go's unstructured.Unstructured. Every object a Context returns is the host's copy,
// free to change.
//
// Numbers are json.Number (exact, also for large integers); Int64 and Float64 read them.
// Readers never fail on a missing field: they return the zero value (and false where they
// say whether it was there). Writers (SetLabel, AddFinalizer, SetCondition, ...) change the
// object in place and create the maps they need.
//
// For typed access, decode a part into a struct (obj.Decode(&spec, "spec")) or a whole object
// into a k8s.io/api type (obj.Into(&deployment)); Context accepts structs wherever it takes an
// object.
type Object map[string]any

// NewObject is a new object of a kind, with apiVersion, kind, and metadata (name, and namespace
// unless it is "").
func NewObject(gvk GVK, namespace, name string) Object {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return Object{"apiVersion": gvk.APIVersion(), "kind": gvk.Kind, "metadata": meta}
}

// ParseObject parses JSON text into an Object (numbers as json.Number).
func ParseObject(text []byte) (Object, error) {
	return parseObject(string(text))
}

// parseObject parses without copying text: the Object's strings may share its memory.
func parseObject(text string) (Object, error) {
	v, err := parseJSON(text)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok || m == nil {
		return nil, fmt.Errorf("%w: %s", errNotAnObject, truncate(text, 40))
	}
	return Object(m), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ToObject converts any JSON-marshalable value (a struct, a k8s.io/api object, a map) into an
// Object.
func ToObject(v any) (Object, error) {
	if o, ok := v.(Object); ok {
		return o, nil
	}
	text, err := marshal(v)
	if err != nil {
		return nil, err
	}
	return ParseObject(text)
}

// DeepCopy is a copy sharing nothing with obj.
func (o Object) DeepCopy() Object {
	if o == nil {
		return nil
	}
	return deepCopy(map[string]any(o)).(map[string]any)
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case Object:
		return Object(deepCopy(map[string]any(v)).(map[string]any))
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}

// Into decodes the whole object into a typed value, e.g. a k8s.io/api appsv1.Deployment.
func (o Object) Into(v any) error {
	text, err := marshal(o)
	if err != nil {
		return err
	}
	return json.Unmarshal(text, v)
}

// Decode decodes the field at path (e.g. "spec") into a typed value; a missing field leaves v
// as it is.
func (o Object) Decode(v any, path ...string) error {
	field, ok := o.Field(path...)
	if !ok {
		return nil
	}
	text, err := marshal(field)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(text, v); err != nil {
		return fmt.Errorf("%s: %w", joinPath(path), err)
	}
	return nil
}

func joinPath(path []string) string {
	out := ""
	for i, p := range path {
		if i > 0 {
			out += "."
		}
		out += p
	}
	return out
}

// --- identity ---

// APIVersion is the object's apiVersion.
func (o Object) APIVersion() string { s, _ := o.String("apiVersion"); return s }

// Kind is the object's kind.
func (o Object) Kind() string { s, _ := o.String("kind"); return s }

// GVK is the object's kind, from apiVersion and kind.
func (o Object) GVK() GVK { return ParseAPIVersion(o.APIVersion(), o.Kind()) }

// Name is metadata.name.
func (o Object) Name() string { s, _ := o.String("metadata", "name"); return s }

// Namespace is metadata.namespace ("" for cluster-scoped objects).
func (o Object) Namespace() string { s, _ := o.String("metadata", "namespace"); return s }

// UID is metadata.uid.
func (o Object) UID() string { s, _ := o.String("metadata", "uid"); return s }

// ResourceVersion is metadata.resourceVersion.
func (o Object) ResourceVersion() string { s, _ := o.String("metadata", "resourceVersion"); return s }

// Generation is metadata.generation: bumped by the API server on every change of the spec.
func (o Object) Generation() int64 { n, _ := o.Int64("metadata", "generation"); return n }

// Key is the object's namespace and name.
func (o Object) Key() ObjectKey { return ObjectKey{Namespace: o.Namespace(), Name: o.Name()} }

// Ref is the object's kind, namespace and name.
func (o Object) Ref() ObjectRef {
	return ObjectRef{GVK: o.GVK(), Namespace: o.Namespace(), Name: o.Name()}
}

// --- fields ---

// Field is the value at path (keys of nested maps), and whether it is there and not null.
func (o Object) Field(path ...string) (any, bool) {
	var current any = map[string]any(o)
	for _, step := range path {
		m, ok := asMap(current)
		if !ok {
			return nil, false
		}
		current, ok = m[step]
		if !ok || current == nil {
			return nil, false
		}
	}
	return current, true
}

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case Object:
		return m, true
	}
	return nil, false
}

// String is the string at path, and whether there is one.
func (o Object) String(path ...string) (string, bool) {
	v, _ := o.Field(path...)
	s, ok := v.(string)
	return s, ok
}

// Int64 is the integer at path, and whether there is one (a number without a fraction).
func (o Object) Int64(path ...string) (int64, bool) {
	v, _ := o.Field(path...)
	return toInt64(v)
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

// Float64 is the number at path, and whether there is one.
func (o Object) Float64(path ...string) (float64, bool) {
	v, _ := o.Field(path...)
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	if i, ok := toInt64(v); ok {
		return float64(i), true
	}
	return 0, false
}

// Bool is the boolean at path, and whether there is one.
func (o Object) Bool(path ...string) (bool, bool) {
	v, _ := o.Field(path...)
	b, ok := v.(bool)
	return b, ok
}

// Map is the map at path (nil when missing).
func (o Object) Map(path ...string) map[string]any {
	v, _ := o.Field(path...)
	m, _ := asMap(v)
	return m
}

// Slice is the list at path (nil when missing).
func (o Object) Slice(path ...string) []any {
	v, _ := o.Field(path...)
	s, _ := v.([]any)
	return s
}

// SetField sets the value at path, creating the maps on the way.
func (o Object) SetField(value any, path ...string) {
	if len(path) == 0 {
		return
	}
	m := map[string]any(o)
	for _, step := range path[:len(path)-1] {
		next, ok := asMap(m[step])
		if !ok {
			next = map[string]any{}
			m[step] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

// RemoveField removes the value at path; whether it was there.
func (o Object) RemoveField(path ...string) bool {
	if len(path) == 0 {
		return false
	}
	parent := o.Map(path[:len(path)-1]...)
	if len(path) == 1 {
		parent = o
	}
	if _, ok := parent[path[len(path)-1]]; !ok {
		return false
	}
	delete(parent, path[len(path)-1])
	return true
}

// --- labels and annotations ---

func (o Object) stringMap(field string) map[string]string {
	out := map[string]string{}
	for k, v := range o.Map("metadata", field) {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// Labels is a copy of metadata.labels (empty, never nil, when there are none).
func (o Object) Labels() map[string]string { return o.stringMap("labels") }

// Label is the value of a label ("" when missing).
func (o Object) Label(key string) string { s, _ := o.String("metadata", "labels", key); return s }

// HasLabel is whether the object carries the label.
func (o Object) HasLabel(key string) bool { _, ok := o.Field("metadata", "labels", key); return ok }

// SetLabel sets a label.
func (o Object) SetLabel(key, value string) { o.SetField(value, "metadata", "labels", key) }

// Annotations is a copy of metadata.annotations (empty, never nil, when there are none).
func (o Object) Annotations() map[string]string { return o.stringMap("annotations") }

// Annotation is the value of an annotation ("" when missing).
func (o Object) Annotation(key string) string {
	s, _ := o.String("metadata", "annotations", key)
	return s
}

// HasAnnotation is whether the object carries the annotation.
func (o Object) HasAnnotation(key string) bool {
	_, ok := o.Field("metadata", "annotations", key)
	return ok
}

// SetAnnotation sets an annotation.
func (o Object) SetAnnotation(key, value string) { o.SetField(value, "metadata", "annotations", key) }

// --- owner references ---

// OwnerReference is one entry of metadata.ownerReferences.
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// IsController is whether the reference has controller: true.
func (r OwnerReference) IsController() bool { return r.Controller != nil && *r.Controller }

// OwnerReferences are the object's owner references.
func (o Object) OwnerReferences() []OwnerReference {
	var refs []OwnerReference
	for _, item := range o.Slice("metadata", "ownerReferences") {
		m, ok := asMap(item)
		if !ok {
			continue
		}
		ref := Object(m)
		r := OwnerReference{APIVersion: ref.APIVersion(), Kind: ref.Kind()}
		r.Name, _ = ref.String("name")
		r.UID, _ = ref.String("uid")
		if b, ok := ref.Bool("controller"); ok {
			r.Controller = &b
		}
		if b, ok := ref.Bool("blockOwnerDeletion"); ok {
			r.BlockOwnerDeletion = &b
		}
		refs = append(refs, r)
	}
	return refs
}

// ControllerRef is the owner reference with controller: true, if any.
func (o Object) ControllerRef() (OwnerReference, bool) {
	for _, r := range o.OwnerReferences() {
		if r.IsController() {
			return r, true
		}
	}
	return OwnerReference{}, false
}

// IsControlledBy is whether owner is the object's controller: an owner reference with
// controller: true and the owner's uid.
func (o Object) IsControlledBy(owner Object) bool {
	r, ok := o.ControllerRef()
	return ok && owner.UID() != "" && r.UID == owner.UID()
}

// OwnerRef is an owner reference to the object (not a controller reference).
func (o Object) OwnerRef() OwnerReference {
	return OwnerReference{APIVersion: o.APIVersion(), Kind: o.Kind(), Name: o.Name(), UID: o.UID()}
}

// ControllerOwnerRef is an owner reference making the object the controller of a child
// (controller and blockOwnerDeletion true), so that the child is garbage-collected with it and
// the child's events reach its controller: put it in the child's metadata.ownerReferences.
func (o Object) ControllerOwnerRef() OwnerReference {
	yes := true
	r := o.OwnerRef()
	r.Controller, r.BlockOwnerDeletion = &yes, &yes
	return r
}

// --- finalizers and deletion ---

// Finalizers are metadata.finalizers.
func (o Object) Finalizers() []string {
	var out []string
	for _, f := range o.Slice("metadata", "finalizers") {
		if s, ok := f.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// HasFinalizer is whether the object carries the finalizer.
func (o Object) HasFinalizer(name string) bool { return slices.Contains(o.Finalizers(), name) }

// AddFinalizer adds a finalizer; false if it was there already.
func (o Object) AddFinalizer(name string) bool {
	current := o.Finalizers()
	if slices.Contains(current, name) {
		return false
	}
	o.setStrings(append(current, name), "metadata", "finalizers")
	return true
}

// RemoveFinalizer removes a finalizer; false if it was not there.
func (o Object) RemoveFinalizer(name string) bool {
	current := o.Finalizers()
	if !slices.Contains(current, name) {
		return false
	}
	o.setStrings(slices.DeleteFunc(current, func(f string) bool { return f == name }), "metadata", "finalizers")
	return true
}

func (o Object) setStrings(values []string, path ...string) {
	list := make([]any, len(values))
	for i, v := range values {
		list[i] = v
	}
	o.SetField(list, path...)
}

// IsDeleting is whether the object has a deletion timestamp (it goes once its finalizers are
// gone).
func (o Object) IsDeleting() bool { _, ok := o.Field("metadata", "deletionTimestamp"); return ok }

// --- status and conditions ---

// StatusObject is the smallest object that server-side applies status to the object's status
// subresource: apiVersion, kind, metadata (name, namespace) and status. For Context.ApplyStatus.
func (o Object) StatusObject(status map[string]any) Object {
	body := NewObject(o.GVK(), o.Namespace(), o.Name())
	body["status"] = status
	return body
}

// Condition is one entry of status.conditions, as in metav1.Condition.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// Conditions are status.conditions.
func (o Object) Conditions() []Condition {
	var out []Condition
	for _, item := range o.Slice("status", "conditions") {
		m, ok := asMap(item)
		if !ok {
			continue
		}
		c := Object(m)
		var cond Condition
		cond.Type, _ = c.String("type")
		cond.Status, _ = c.String("status")
		cond.Reason, _ = c.String("reason")
		cond.Message, _ = c.String("message")
		cond.ObservedGeneration, _ = c.Int64("observedGeneration")
		cond.LastTransitionTime, _ = c.String("lastTransitionTime")
		out = append(out, cond)
	}
	return out
}

// Condition is the condition of a type (e.g. "Ready"), if present.
func (o Object) Condition(conditionType string) (Condition, bool) {
	for _, c := range o.Conditions() {
		if c.Type == conditionType {
			return c, true
		}
	}
	return Condition{}, false
}

// ConditionStatus is "True", "False", "Unknown", or "" when there is no condition of the type.
func (o Object) ConditionStatus(conditionType string) string {
	c, _ := o.Condition(conditionType)
	return c.Status
}

// IsConditionTrue is whether the condition of the type has status "True".
func (o Object) IsConditionTrue(conditionType string) bool {
	return o.ConditionStatus(conditionType) == "True"
}

// SetCondition sets a condition in status.conditions the way Kubernetes' meta.SetStatusCondition
// does: lastTransitionTime (now, when cond has none) changes only when the status changes.
// Returns whether anything changed.
func (o Object) SetCondition(cond Condition) bool {
	if cond.LastTransitionTime == "" {
		cond.LastTransitionTime = time.Now().UTC().Format(time.RFC3339)
	}
	wanted := map[string]any{"type": cond.Type, "status": cond.Status, "reason": cond.Reason, "message": cond.Message}
	if cond.ObservedGeneration != 0 {
		wanted["observedGeneration"] = json.Number(strconv.FormatInt(cond.ObservedGeneration, 10))
	}
	list := o.Slice("status", "conditions")
	for _, item := range list {
		m, ok := asMap(item)
		if !ok || m["type"] != cond.Type {
			continue
		}
		changed := false
		if m["status"] != cond.Status {
			m["lastTransitionTime"] = cond.LastTransitionTime
			changed = true
		}
		for k, v := range wanted {
			if text(m[k]) != text(v) {
				m[k] = v
				changed = true
			}
		}
		return changed
	}
	wanted["lastTransitionTime"] = cond.LastTransitionTime
	o.SetField(append(list, wanted), "status", "conditions")
	return true
}

// text is a field's value for comparing conditions: a missing field reads as "".
func text(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// RemoveCondition removes the condition of a type; false if there was none.
func (o Object) RemoveCondition(conditionType string) bool {
	list := o.Slice("status", "conditions")
	kept := slices.DeleteFunc(slices.Clone(list), func(item any) bool {
		m, ok := asMap(item)
		return ok && m["type"] == conditionType
	})
	if len(kept) == len(list) {
		return false
	}
	o.SetField(kept, "status", "conditions")
	return true
}

// SortedKeys are the keys of objects, sorted by namespace then name.
func SortedKeys(objects []Object) []ObjectKey {
	keys := make([]ObjectKey, len(objects))
	for i, o := range objects {
		keys[i] = o.Key()
	}
	slices.SortFunc(keys, func(a, b ObjectKey) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return keys
}
