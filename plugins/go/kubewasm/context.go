package kubewasm

import (
	"encoding/json"
	"errors"
	"fmt"
)

// PatchType is the format of a patch body.
type PatchType uint8

const (
	// MergePatch is an RFC 7386 JSON merge patch (an object).
	MergePatch PatchType = iota
	// JSONPatch is an RFC 6902 JSON patch (a list of operations).
	JSONPatch
	// StrategicMergePatch is a Kubernetes strategic merge patch (built-in resources only).
	StrategicMergePatch
)

func (p PatchType) String() string {
	switch p {
	case MergePatch:
		return "merge"
	case JSONPatch:
		return "json"
	case StrategicMergePatch:
		return "strategic"
	}
	return fmt.Sprintf("patch-type(%d)", uint8(p))
}

// EventType is the type of a Kubernetes Event.
type EventType uint8

const (
	Normal EventType = iota
	Warning
)

func (t EventType) String() string {
	if t == Warning {
		return "Warning"
	}
	return "Normal"
}

// LogLevel is the level of a log record.
type LogLevel uint8

const (
	LevelTrace LogLevel = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

func (l LogLevel) String() string {
	return [...]string{"trace", "debug", "info", "warn", "error"}[min(int(l), 4)]
}

// Event is a Kubernetes Event about an object.
type Event struct {
	Regarding ObjectRef
	Type      EventType
	// Reason is why, in PascalCase, 1 to 128 bytes, e.g. "DeploymentNotOwned".
	Reason string
	// Action is what was done or attempted, 1 to 128 bytes, e.g. "Reconcile".
	Action string
	// Note is for humans, at most 1024 bytes.
	Note string
}

// LogField is one key=value pair of a log record.
type LogField struct {
	Key   string
	Value string
}

// ClusterHost is what the host offers in one cluster: cache reads and API writes, with objects
// as JSON text and failures as *Error. A Host is one for the cluster of the call's object;
// Host.InCluster is one for a named cluster.
//
// Namespaces are "" for none (cluster-scoped objects; every namespace for CacheList), label
// selectors "" for none.
type ClusterHost interface {
	CacheGet(resource GVK, namespace, name string) (obj string, found bool, err error)
	CacheList(resource GVK, namespace, labelSelector string) ([]string, error)
	Apply(obj string, force bool) (string, error)
	ApplyStatus(obj string, force bool) (string, error)
	Create(obj string) (string, error)
	Update(obj string) (string, error)
	UpdateStatus(obj string) (string, error)
	Patch(resource GVK, namespace, name string, patchType PatchType, body string) (string, error)
	Delete(resource GVK, namespace, name string) error
}

// Host is the kubewasm host as the WIT contract offers it, with objects as JSON text and
// failures as *Error. Inside a component it is the WIT imports; in unit tests it is
// kubewasmtest.FakeHost. A controller never calls it directly: Context does.
//
// Its ClusterHost methods act in the cluster of the call's object (the cache and client
// imports); InCluster's in a named one (the fleet import).
type Host interface {
	ClusterHost
	// CacheListControlled is the cached objects of resource whose controller owner reference
	// names the object of uid owner, sorted by namespace then name (WIT list-controlled);
	// namespace "" for every namespace.
	CacheListControlled(resource GVK, namespace, owner string) ([]string, error)
	PublishEvent(event Event) error
	Log(level LogLevel, message string, fields []LogField)
	// Cluster is the member cluster the call's object lives in, "" for the host's own (WIT
	// fleet.current).
	Cluster() string
	// Clusters are the member clusters engaged now that the plugin serves or reaches, sorted by
	// name (WIT fleet.clusters).
	Clusters() []Cluster
	// InCluster is the cache reads and API writes in the named cluster, "" for the host's own
	// (the WIT fleet functions). name is at most MaxCluster bytes (Context checks it).
	InCluster(name string) ClusterHost
}

// Cluster is a member cluster the plugin serves or reaches, as Context.Clusters lists it.
type Cluster struct {
	// Name is the kubeconfig file's stem or the kubeconfig Secret's name (at most 253 bytes).
	Name string
	// Labels are the cluster's labels (the Secret's, or the kubeconfig context's
	// kubewasm.io/labels extension): what Members selectors match.
	Labels map[string]string
}

// Context is the host, as seen from one call: cache reads, API writes, Events and logs. Every
// method that can fail returns an *Error (match it with errors.Is(err, kubewasm.ErrConflict),
// kubewasm.IsNotFound(err), ...).
//
// Every method checks the sizes the host takes before calling it (names, namespaces, kinds,
// objects, patches, selectors, Event texts: MaxName and the other bounds): an over-long value
// is an error of code invalid with the host's own message, e.g. "name is 254 bytes; at most 253".
//
// Objects going in may be an Object or any value encoding/json turns into one (a struct with
// json tags, a k8s.io/api type); a typed one without apiVersion or kind gets them from the kind
// the manifest declares under its type's name (appsv1.Deployment: the declared Deployment of
// version v1). Objects coming out are Objects (decode them with Into).
//
// A Context from InCluster reads and writes in a named cluster instead (contract 0.1.4).
type Context struct {
	// host is the call's: its Events, logs and clusters.
	host Host
	// target is where reads and writes go: host itself, or host.InCluster(cluster).
	target ClusterHost
	// named is whether InCluster chose target.
	named bool
	// refused answers every read and write instead of target: the name InCluster was given is
	// too long.
	refused error
	key     ObjectKey
	retries int
	// kinds give typed objects written without TypeMeta their apiVersion and kind.
	kinds declaredKinds
	// review is the admission request of a hook call (nil in other calls).
	review *Review
}

// NewContext is a Context for a call about key. Harnesses make these; controllers get theirs.
func NewContext(host Host, key ObjectKey, retries int) *Context {
	return &Context{host: host, target: host, key: key, retries: retries}
}

// Key is the key being reconciled (zero in MapRelated).
func (c *Context) Key() ObjectKey { return c.key }

// Retries is how many times in a row this key failed before this call.
func (c *Context) Retries() int { return c.retries }

// Review is the admission request a CustomValidator or CustomDefaulter answers (which hook,
// operation, user, dry run), as controller-runtime's admission.RequestFromContext; nil in
// other calls.
func (c *Context) Review() *Review { return c.review }

// --- clusters (contract 0.1.4) ---

// Cluster is the member cluster the call's object lives in, "" for the host's own cluster
// (always, in a plugin that serves no member). A Context from InCluster answers the same.
func (c *Context) Cluster() string { return c.host.Cluster() }

// Clusters are the member clusters engaged now that the plugin serves or reaches
// (Manifest.ServeMembers, ReachMembers), sorted by name; the host's own cluster is not listed.
// Engaged is not reachable: a call there may still fail with code unavailable.
func (c *Context) Clusters() []Cluster { return c.host.Clusters() }

// InCluster is this Context with its reads and writes — Get, List, Apply, ApplyStatus, Create,
// Update, UpdateStatus, Patch, Delete and what builds on them — in the named cluster, "" for the
// host's own (which is not the call's cluster when the call's object lives in a member):
//
//	_, err := ctx.InCluster("eu-1").Apply(cm)
//
// The plugin acts there as its own identity: a member outside its clusters scope answers code
// forbidden, one not engaged now (or not synced yet, or whose API server does not answer) code
// unavailable. Events, logs, Key, Retries and Cluster stay the call's; ListControlled (and so
// DeleteControlled) reads the call's cluster only and is refused in a named one. A name over
// MaxCluster bytes fails each read and write with code invalid before the host is called.
func (c *Context) InCluster(name string) *Context {
	in := *c
	in.named = true
	in.refused = atMost("cluster", name, MaxCluster)
	if in.refused == nil {
		in.target = c.host.InCluster(name)
	} else {
		in.target = nil
	}
	return &in
}

// in is where reads and writes go, or why they may not.
func (c *Context) in() (ClusterHost, error) {
	if c.refused != nil {
		return nil, c.refused
	}
	return c.target, nil
}

func parse(text string) (Object, error) {
	obj, err := parseObject(text)
	if err != nil {
		return nil, &Error{Code: CodeInvalid, Message: "the host returned an object that does not parse: " + err.Error()}
	}
	return obj, nil
}

// dump is obj's JSON text (a string is taken as it is) within limit bytes, encoded by encode:
// "object" or "patch body" names it in errors.
func dump(obj any, encode func(any) ([]byte, error), what string, limit int) (string, error) {
	text, ok := obj.(string)
	if !ok {
		encoded, err := encode(obj)
		var e *Error
		if errors.As(err, &e) {
			return "", e
		}
		if err != nil {
			return "", &Error{Code: CodeInvalid, Message: what + " is not JSON: " + err.Error()}
		}
		text = string(encoded)
	}
	if err := atMost(what, text, limit); err != nil {
		return "", err
	}
	return text, nil
}

// --- the cache: reads without an API round trip ---

// Get is an object from the cache (a copy). namespace is "" for cluster-scoped resources. A
// missing object is an error of code not-found: test it with kubewasm.IsNotFound(err).
func (c *Context) Get(gvk GVK, namespace, name string) (Object, error) {
	text, err := c.getText(gvk, namespace, name)
	if err != nil {
		return nil, err
	}
	return parse(text)
}

// getText is the cached object's JSON text; a missing one is an error of code not-found.
func (c *Context) getText(gvk GVK, namespace, name string) (string, error) {
	target, err := c.in()
	if err != nil {
		return "", err
	}
	if err := checkTarget(gvk, namespace, name); err != nil {
		return "", err
	}
	text, found, err := target.CacheGet(gvk, namespace, name)
	if err != nil {
		return "", err
	}
	if !found {
		return "", &Error{Code: CodeNotFound, Message: fmt.Sprintf("%s %s not found", gvk, ObjectKey{namespace, name})}
	}
	return text, nil
}

// GetInto reads an object from the cache into a typed value (e.g. a k8s.io/api type).
func (c *Context) GetInto(gvk GVK, namespace, name string, into any) error {
	text, err := c.getText(gvk, namespace, name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(text), into); err != nil {
		return &Error{Code: CodeInvalid, Message: err.Error()}
	}
	return nil
}

// ListOption narrows a List: InNamespace, MatchingLabels.
type ListOption func(*listOptions)

type listOptions struct{ namespace, selector string }

// InNamespace lists one namespace (default: every readable namespace).
func InNamespace(namespace string) ListOption {
	return func(o *listOptions) { o.namespace = namespace }
}

// MatchingLabels lists the objects matching a label selector such as "app=web,tier!=db".
func MatchingLabels(selector string) ListOption {
	return func(o *listOptions) { o.selector = selector }
}

func (c *Context) listText(gvk GVK, opts []ListOption) ([]string, error) {
	target, err := c.in()
	if err != nil {
		return nil, err
	}
	var o listOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkGVK(gvk); err != nil {
		return nil, err
	}
	if err := atMost("namespace", o.namespace, MaxNamespace); err != nil {
		return nil, err
	}
	if err := atMost("label selector", o.selector, MaxLabelSelector); err != nil {
		return nil, err
	}
	return target.CacheList(gvk, o.namespace, o.selector)
}

// List is the objects of a resource from the cache, sorted by namespace then name.
func (c *Context) List(gvk GVK, opts ...ListOption) ([]Object, error) {
	return parseAll(c.listText(gvk, opts))
}

// parseAll is the objects of texts, or the error that came instead of them.
func parseAll(texts []string, err error) ([]Object, error) {
	if err != nil {
		return nil, err
	}
	out := make([]Object, len(texts))
	for i, t := range texts {
		if out[i], err = parse(t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ListInto lists into a slice of a typed value, e.g. *[]corev1.Node.
func ListInto[T any](c *Context, gvk GVK, into *[]T, opts ...ListOption) error {
	texts, err := c.listText(gvk, opts)
	if err != nil {
		return err
	}
	return unmarshalAll(texts, into)
}

func unmarshalAll[T any](texts []string, into *[]T) error {
	out := make([]T, len(texts))
	for i, t := range texts {
		if err := json.Unmarshal([]byte(t), &out[i]); err != nil {
			return &Error{Code: CodeInvalid, Message: err.Error()}
		}
	}
	*into = out
	return nil
}

func (c *Context) listControlledText(gvk GVK, owner string, opts []ListOption) ([]string, error) {
	if c.named {
		return nil, &Error{Code: CodeInvalid, Message: "ListControlled reads the call's own cluster only: list by label in another"}
	}
	var o listOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.selector != "" {
		return nil, &Error{Code: CodeInvalid, Message: "ListControlled takes no label selector (only InNamespace)"}
	}
	if err := checkGVK(gvk); err != nil {
		return nil, err
	}
	if err := atMost("namespace", o.namespace, MaxNamespace); err != nil {
		return nil, err
	}
	if err := atMost("owner", owner, MaxOwner); err != nil {
		return nil, err
	}
	return c.host.CacheListControlled(gvk, o.namespace, owner)
}

// ListControlled is the objects of a resource from the cache whose controller owner reference
// (controller: true) names the object of uid owner — a parent's children, e.g.
// ctx.ListControlled(deployments, parent.UID(), InNamespace(parent.Namespace())) — sorted by
// namespace then name. InNamespace narrows it to one namespace (default: every readable one);
// MatchingLabels is refused. Served from the host's index of controller owners, so it costs
// the children's count, not the namespace's; refused and bounded as List is. It reads the
// call's cluster only: on a Context from InCluster it is refused (code invalid).
func (c *Context) ListControlled(gvk GVK, owner string, opts ...ListOption) ([]Object, error) {
	return parseAll(c.listControlledText(gvk, owner, opts))
}

// ListControlledInto is ListControlled into a slice of a typed value, e.g. *[]appsv1.Deployment.
func ListControlledInto[T any](c *Context, gvk GVK, owner string, into *[]T, opts ...ListOption) error {
	texts, err := c.listControlledText(gvk, owner, opts)
	if err != nil {
		return err
	}
	return unmarshalAll(texts, into)
}

// --- the client: writes as field manager kubewasm/<plugin> ---

// ApplyOption changes a server-side apply: NoForce.
type ApplyOption func(*bool)

// NoForce makes a server-side apply fail with conflict instead of taking over fields other
// managers set.
func NoForce() ApplyOption { return func(force *bool) { *force = false } }

func applyForce(opts []ApplyOption) bool {
	force := true
	for _, o := range opts {
		o(&force)
	}
	return force
}

// write sends obj's JSON text through call, a write of target.
func (c *Context) write(call func(target ClusterHost, obj string) (string, error), obj any) (Object, error) {
	target, err := c.in()
	if err != nil {
		return nil, err
	}
	text, err := dump(obj, c.kinds.encodeObject, "object", MaxObject)
	if err != nil {
		return nil, err
	}
	stored, err := call(target, text)
	if err != nil {
		return nil, err
	}
	return parse(stored)
}

// Apply is a server-side apply: owns the given fields and sets them, creating the object if
// needed. By default it takes over fields other managers set (what controllers usually want);
// with NoForce such a clash fails with conflict. Returns the object as stored.
func (c *Context) Apply(obj any, opts ...ApplyOption) (Object, error) {
	force := applyForce(opts)
	return c.write(func(h ClusterHost, t string) (string, error) { return h.Apply(t, force) }, obj)
}

// ApplyStatus is a server-side apply of the status subresource (see Object.StatusObject).
func (c *Context) ApplyStatus(obj any, opts ...ApplyOption) (Object, error) {
	force := applyForce(opts)
	return c.write(func(h ClusterHost, t string) (string, error) { return h.ApplyStatus(t, force) }, obj)
}

// Create creates the object; already-exists if the name is taken.
func (c *Context) Create(obj any) (Object, error) { return c.write(ClusterHost.Create, obj) }

// Update replaces the object; conflict if its metadata.resourceVersion is stale.
func (c *Context) Update(obj any) (Object, error) { return c.write(ClusterHost.Update, obj) }

// UpdateStatus replaces the status; conflict if the resourceVersion is stale.
func (c *Context) UpdateStatus(obj any) (Object, error) {
	return c.write(ClusterHost.UpdateStatus, obj)
}

// Patch patches an object. body is the patch: a map or struct (encoded as JSON), or a string
// or []byte of JSON. Returns the object as stored.
func (c *Context) Patch(gvk GVK, namespace, name string, patchType PatchType, body any) (Object, error) {
	target, err := c.in()
	if err != nil {
		return nil, err
	}
	if err := checkTarget(gvk, namespace, name); err != nil {
		return nil, err
	}
	if b, ok := body.([]byte); ok {
		body = string(b)
	}
	text, err := dump(body, marshal, "patch body", MaxPatchBody)
	if err != nil {
		return nil, err
	}
	stored, err := target.Patch(gvk, namespace, name, patchType, text)
	if err != nil {
		return nil, err
	}
	return parse(stored)
}

// Delete deletes an object (its dependents are garbage-collected); not-found if already gone.
func (c *Context) Delete(gvk GVK, namespace, name string) error {
	target, err := c.in()
	if err != nil {
		return err
	}
	if err := checkTarget(gvk, namespace, name); err != nil {
		return err
	}
	return target.Delete(gvk, namespace, name)
}

// DeleteControlled deletes the objects of kinds that owner controls (in its namespace),
// skipping kinds the plugin may not delete (MayDelete false), with a warning. What the default
// Released does, with Manifest.Owned() as kinds.
func (c *Context) DeleteControlled(owner Object, kinds []OwnedKind) error {
	if owner.UID() == "" {
		return nil
	}
	for _, kind := range kinds {
		if !kind.MayDelete {
			c.Warn(fmt.Sprintf("leaving the %s objects of %s in place: the manifest grants no delete on them", kind.GVK.Kind, owner.Name()))
			continue
		}
		var opts []ListOption
		if ns := owner.Namespace(); ns != "" {
			opts = append(opts, InNamespace(ns))
		}
		children, err := c.ListControlled(kind.GVK, owner.UID(), opts...)
		if err != nil {
			return err
		}
		for _, child := range children {
			if err := c.Delete(kind.GVK, child.Namespace(), child.Name()); IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// --- events and logs ---

// Event records a Kubernetes Event about an object: reason in PascalCase, action what was done
// or attempted, note for humans.
func (c *Context) Event(regarding Object, eventType EventType, reason, action, note string) error {
	return c.EventAbout(regarding.Ref(), eventType, reason, action, note)
}

// EventAbout records a Kubernetes Event about the object ref names.
func (c *Context) EventAbout(ref ObjectRef, eventType EventType, reason, action, note string) error {
	event := Event{Regarding: ref, Type: eventType, Reason: reason, Action: action, Note: note}
	if err := checkTarget(ref.GVK, ref.Namespace, ref.Name); err != nil {
		return err
	}
	if err := checkEvent(event); err != nil {
		return err
	}
	return c.host.PublishEvent(event)
}

// Log writes a structured record into the host's log; keysAndValues alternate keys and values,
// as in logr: ctx.Log(kubewasm.LevelInfo, "granted", "node", name, "unavailable", n).
func (c *Context) Log(level LogLevel, message string, keysAndValues ...any) {
	fields := make([]LogField, 0, (len(keysAndValues)+1)/2)
	for i := 0; i < len(keysAndValues); i += 2 {
		key := fmt.Sprint(keysAndValues[i])
		value := "(missing)"
		if i+1 < len(keysAndValues) {
			value = fmt.Sprint(keysAndValues[i+1])
		}
		fields = append(fields, LogField{Key: key, Value: value})
	}
	c.host.Log(level, message, fields)
}

func (c *Context) Trace(message string, keysAndValues ...any) {
	c.Log(LevelTrace, message, keysAndValues...)
}
func (c *Context) Debug(message string, keysAndValues ...any) {
	c.Log(LevelDebug, message, keysAndValues...)
}
func (c *Context) Info(message string, keysAndValues ...any) {
	c.Log(LevelInfo, message, keysAndValues...)
}
func (c *Context) Warn(message string, keysAndValues ...any) {
	c.Log(LevelWarn, message, keysAndValues...)
}
func (c *Context) Error(message string, keysAndValues ...any) {
	c.Log(LevelError, message, keysAndValues...)
}
