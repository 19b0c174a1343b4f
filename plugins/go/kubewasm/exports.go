package kubewasm

// The WIT world's exports over a Plugin (internal/dispatch.Exports): the conversions between the
// bindings' types and the SDK's, which calls answer and which trap. Compiled everywhere, so that
// unit tests run it; component_wasip1.go wires it to the WIT imports, the garbage collector
// guard and the trap.

import (
	"strings"

	"github.com/kubewasm/kubewasm/plugins/go/internal/dispatch"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_access"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_clusters"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_composite"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_plugin"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_projections"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_reconciler"
	wit "github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_types"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_webhooks"
	witTypes "github.com/kubewasm/kubewasm/plugins/go/internal/witpkg/types"
)

// exports answers the host's calls. Every export runs between enter and leave (the garbage
// collector guard: a collection at entry when due, the collector off again before the host reads
// the results and writes the next call's arguments).
type exports struct {
	plugin *Plugin
	// newPlugin is the plugin describe builds: the exported controller's.
	newPlugin func() (*Plugin, error)
	enter     func()
	leave     func()
	// fault ends an export that failed without an answer — a panic, an error of map-related
	// (which has no error value), a call the host never makes to this kind of plugin — with a
	// trap: in the component it does not return.
	fault func(what string, reason any)
	// described is told the manifest describe answered.
	described func(ManifestSpec)
}

var _ dispatch.Exports = (*exports)(nil)

// caught turns a panic of the export into a fault (deferred: it recovers).
func (c *exports) caught(what string) {
	if r := recover(); r != nil {
		if w, ok := r.(wrongKind); ok {
			c.fault(what, w)
			return
		}
		c.fault(what+" panicked", r)
	}
}

// --- conversions between the SDK's types and the bindings' ---

func option(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

func witGVK(g GVK) wit.Gvk { return wit.Gvk{Group: g.Group, Version: g.Version, Kind: g.Kind} }

func witGVKs(gs []GVK) []wit.Gvk {
	out := make([]wit.Gvk, len(gs))
	for i, g := range gs {
		out[i] = witGVK(g)
	}
	return out
}

func fromWitGVK(g wit.Gvk) GVK { return GVK{Group: g.Group, Version: g.Version, Kind: g.Kind} }

func fromWitKey(k wit.ObjectKey) ObjectKey {
	return ObjectKey{Namespace: k.Namespace.SomeOr(""), Name: k.Name}
}

func witError(err error) wit.Error {
	e := asError(err)
	return wit.Error{Code: uint8(e.Code), Message: e.Message}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

var beforeDescribe = wit.Error{Code: uint8(CodeOther), Message: "the host called the plugin before describe"}

// --- plugin, access, views, clusters: both kinds of plugin ---

func (c *exports) Describe(settings string) witTypes.Result[kubewasm_controller_plugin.Manifest, string] {
	c.enter()
	defer c.leave()
	plugin, err := c.newPlugin()
	if err != nil {
		return witTypes.Err[kubewasm_controller_plugin.Manifest](err.Error())
	}
	spec, err := plugin.Describe(settings)
	if err != nil {
		return witTypes.Err[kubewasm_controller_plugin.Manifest](err.Error())
	}
	c.plugin = plugin
	if c.described != nil {
		c.described(spec)
	}
	return witTypes.Ok[kubewasm_controller_plugin.Manifest, string](witManifest(spec))
}

func witManifest(spec ManifestSpec) kubewasm_controller_plugin.Manifest {
	watches := make([]kubewasm_controller_plugin.Watch, len(spec.Watches))
	for i, w := range spec.Watches {
		var mapping kubewasm_controller_plugin.Mapping
		switch w.Mapping.Kind {
		case MapOwnerReferences:
			mapping = kubewasm_controller_plugin.MakeMappingOwnerReferences()
		case MapLabel:
			mapping = kubewasm_controller_plugin.MakeMappingLabel(w.Mapping.LabelKey)
		default:
			mapping = kubewasm_controller_plugin.MakeMappingMapRelated()
		}
		watches[i] = kubewasm_controller_plugin.Watch{Resource: witGVK(w.GVK), Mapping: mapping, LabelSelector: option(w.LabelSelector)}
	}
	permissions := make([]kubewasm_controller_plugin.Permission, len(spec.Permissions))
	for i, p := range spec.Permissions {
		verbs := make([]uint8, len(p.Verbs))
		for j, v := range p.Verbs {
			verbs[j] = uint8(v)
		}
		permissions[i] = kubewasm_controller_plugin.Permission{Resource: witGVK(p.GVK), Subresource: option(p.Subresource), Verbs: verbs, Namespaces: nonNil(p.Namespaces)}
	}
	resync := witTypes.None[uint32]()
	if spec.Resync != nil {
		resync = witTypes.Some(uint32(min(spec.Resync.Seconds(), 4294967295)))
	}
	deadline := witTypes.None[uint32]()
	if spec.Limits.Deadline > 0 {
		deadline = witTypes.Some(uint32(spec.Limits.Deadline.Milliseconds()))
	}
	memory := witTypes.None[uint64]()
	if spec.Limits.MemoryBytes > 0 {
		memory = witTypes.Some(spec.Limits.MemoryBytes)
	}
	return kubewasm_controller_plugin.Manifest{
		Name:            spec.Name,
		Version:         spec.Version,
		Primary:         witGVK(spec.Primary),
		PrimarySelector: option(spec.PrimarySelector),
		Owns:            witGVKs(spec.Owns),
		Watches:         watches,
		Finalizer:       option(spec.Finalizer),
		ResyncSeconds:   resync,
		MaxConcurrency:  spec.MaxConcurrency,
		Limits:          kubewasm_controller_plugin.Limits{DeadlineMs: deadline, MemoryBytes: memory},
		Permissions:     permissions,
	}
}

func (c *exports) Rules() []kubewasm_controller_access.Rule {
	c.enter()
	defer c.leave()
	if c.plugin == nil {
		return nil
	}
	rules := c.plugin.Rules()
	out := make([]kubewasm_controller_access.Rule, len(rules))
	for i, r := range rules {
		out[i] = kubewasm_controller_access.Rule{
			Resource:      witGVK(r.GVK),
			Subresource:   option(r.Subresource),
			Verbs:         nonNil(r.Verbs),
			Namespaces:    nonNil(r.Namespaces),
			ResourceNames: nonNil(r.ResourceNames),
		}
	}
	return out
}

func (c *exports) MetadataOnly() []wit.Gvk {
	c.enter()
	defer c.leave()
	if c.plugin == nil {
		return nil
	}
	return witGVKs(c.plugin.MetadataOnly())
}

func (c *exports) Projections() []kubewasm_controller_projections.Projection {
	c.enter()
	defer c.leave()
	if c.plugin == nil {
		return nil
	}
	read := c.plugin.ReadsFields()
	out := make([]kubewasm_controller_projections.Projection, len(read))
	for i, r := range read {
		paths := make([][]string, len(r.Fields))
		for j, f := range r.Fields {
			paths[j] = strings.Split(f, ".")
		}
		out[i] = kubewasm_controller_projections.Projection{Resource: witGVK(r.GVK), Fields: paths}
	}
	return out
}

func witMembers(m Members) kubewasm_controller_clusters.Members {
	switch m.kind {
	case membersAll:
		return kubewasm_controller_clusters.MakeMembersAll()
	case membersMatching:
		return kubewasm_controller_clusters.MakeMembersMatching(m.selector)
	}
	return kubewasm_controller_clusters.MakeMembersNone()
}

func witScope(s ClusterScope) kubewasm_controller_clusters.ClusterScope {
	return kubewasm_controller_clusters.ClusterScope{ServeLocal: s.ServeLocal, Serve: witMembers(s.Serve), Reach: witMembers(s.Reach)}
}

// Scope answers the clusters the plugin serves and reaches; before describe (the host never
// asks then), what a plugin without the export gets: the host's own cluster only.
func (c *exports) Scope() kubewasm_controller_clusters.ClusterScope {
	c.enter()
	defer c.leave()
	if c.plugin == nil {
		return witScope(ClusterScope{ServeLocal: true})
	}
	return witScope(c.plugin.ClusterScope())
}

// --- reconciler, release: a Controller's (a trap for a Composite's) ---

func (c *exports) call(method Method, request kubewasm_controller_reconciler.Request) witTypes.Result[wit.Action, wit.Error] {
	c.enter()
	defer c.leave()
	defer c.caught(string(method))
	if c.plugin == nil {
		return witTypes.Err[wit.Action](beforeDescribe)
	}
	result, err := c.plugin.Call(method, fromWitKey(request.Key), request.Object, int(request.Retries))
	if err != nil {
		return witTypes.Err[wit.Action](witError(err))
	}
	if result.RequeueAfter > 0 {
		return witTypes.Ok[wit.Action, wit.Error](wit.MakeActionRequeueAfter(requeueMillis(result.RequeueAfter)))
	}
	return witTypes.Ok[wit.Action, wit.Error](wit.MakeActionDone())
}

func (c *exports) Reconcile(request kubewasm_controller_reconciler.Request) witTypes.Result[wit.Action, wit.Error] {
	return c.call(MethodReconcile, request)
}

func (c *exports) Finalize(request kubewasm_controller_reconciler.Request) witTypes.Result[wit.Action, wit.Error] {
	return c.call(MethodFinalize, request)
}

func (c *exports) Released(request kubewasm_controller_reconciler.Request) witTypes.Result[wit.Action, wit.Error] {
	return c.call(MethodReleased, request)
}

func (c *exports) MapRelated(resource wit.Gvk, object string) []wit.ObjectKey {
	c.enter()
	defer c.leave()
	if c.plugin == nil {
		return nil
	}
	defer c.caught("map-related")
	keys, err := c.plugin.MapRelated(fromWitGVK(resource), object)
	if err != nil {
		c.fault("map-related failed", err)
	}
	out := make([]wit.ObjectKey, len(keys))
	for i, k := range keys {
		out[i] = wit.ObjectKey{Namespace: option(k.Namespace), Name: k.Name}
	}
	return out
}

// --- composite: a Composite's (none, and a trap, for a Controller's) ---

func (c *exports) DescribeComposition() witTypes.Option[kubewasm_controller_composite.Composition] {
	c.enter()
	defer c.leave()
	if c.plugin == nil {
		return witTypes.None[kubewasm_controller_composite.Composition]()
	}
	composition := c.plugin.Composition()
	if composition == nil {
		return witTypes.None[kubewasm_controller_composite.Composition]()
	}
	return witTypes.Some(witComposition(composition))
}

func witComposition(c *Composition) kubewasm_controller_composite.Composition {
	rules := make([]kubewasm_controller_composite.ChildRule, len(c.Children))
	for i, r := range c.Children {
		rules[i] = kubewasm_controller_composite.ChildRule{Resource: witGVK(r.GVK), UpdateStrategy: uint8(r.Strategy)}
	}
	return kubewasm_controller_composite.Composition{Children: rules, Selector: uint8(c.Selector)}
}

func (c *exports) Customize(parent string) witTypes.Result[[]kubewasm_controller_composite.RelatedRule, wit.Error] {
	c.enter()
	defer c.leave()
	defer c.caught("customize")
	if c.plugin == nil {
		return witTypes.Err[[]kubewasm_controller_composite.RelatedRule](beforeDescribe)
	}
	rules, err := c.plugin.Customize(parent)
	if err != nil {
		return witTypes.Err[[]kubewasm_controller_composite.RelatedRule](witError(err))
	}
	out := make([]kubewasm_controller_composite.RelatedRule, len(rules))
	for i, r := range rules {
		out[i] = kubewasm_controller_composite.RelatedRule{
			Resource:      witGVK(r.GVK),
			Namespace:     option(r.Namespace),
			Names:         nonNil(r.Names),
			LabelSelector: option(r.LabelSelector),
		}
	}
	return witTypes.Ok[[]kubewasm_controller_composite.RelatedRule, wit.Error](out)
}

func (c *exports) Sync(request kubewasm_controller_composite.SyncRequest) witTypes.Result[kubewasm_controller_composite.SyncResponse, wit.Error] {
	return c.compose(MethodSync, request)
}

func (c *exports) FinalizeComposite(request kubewasm_controller_composite.SyncRequest) witTypes.Result[kubewasm_controller_composite.SyncResponse, wit.Error] {
	return c.compose(MethodFinalize, request)
}

func rawObjects(groups []kubewasm_controller_composite.Objects) []RawObjects {
	out := make([]RawObjects, len(groups))
	for i, g := range groups {
		out[i] = RawObjects{GVK: fromWitGVK(g.Resource), Items: g.Items}
	}
	return out
}

func (c *exports) compose(method Method, request kubewasm_controller_composite.SyncRequest) witTypes.Result[kubewasm_controller_composite.SyncResponse, wit.Error] {
	c.enter()
	defer c.leave()
	defer c.caught(string(method))
	if c.plugin == nil {
		return witTypes.Err[kubewasm_controller_composite.SyncResponse](beforeDescribe)
	}
	raw, err := c.plugin.CallComposite(method, RawSyncRequest{
		Parent:     request.Parent,
		Children:   rawObjects(request.Children),
		Related:    rawObjects(request.Related),
		Finalizing: request.Finalizing,
	})
	if err != nil {
		return witTypes.Err[kubewasm_controller_composite.SyncResponse](witError(err))
	}
	resync := witTypes.None[uint64]()
	if raw.ResyncAfter > 0 {
		resync = witTypes.Some(raw.ResyncAfter)
	}
	return witTypes.Ok[kubewasm_controller_composite.SyncResponse, wit.Error](kubewasm_controller_composite.SyncResponse{
		Status:      option(raw.Status),
		Children:    nonNil(raw.Children),
		ResyncAfter: resync,
		Finalized:   raw.Finalized,
	})
}

// --- webhooks: either kind of plugin ---

func witHook(h AdmissionHook) kubewasm_controller_webhooks.AdmissionHook {
	operations := make([]kubewasm_controller_webhooks.Operation, len(h.Operations))
	for i, o := range h.Operations {
		operations[i] = uint8(o)
	}
	conditions := make([]kubewasm_controller_webhooks.MatchCondition, len(h.MatchConditions))
	for i, c := range h.MatchConditions {
		conditions[i] = kubewasm_controller_webhooks.MatchCondition{Name: c.Name, Expression: c.Expression}
	}
	return kubewasm_controller_webhooks.AdmissionHook{
		Name:            h.Name,
		Mutating:        h.Mutating,
		Kinds:           witGVKs(h.Kinds),
		Operations:      operations,
		FailurePolicy:   uint8(h.FailurePolicy),
		TimeoutSeconds:  h.TimeoutSeconds,
		SideEffects:     uint8(h.SideEffects),
		MatchConditions: conditions,
	}
}

// Declare answers the manifest's hooks; none before describe (the host never asks then).
func (c *exports) Declare() kubewasm_controller_webhooks.Declaration {
	c.enter()
	defer c.leave()
	declaration := kubewasm_controller_webhooks.Declaration{Admission: []kubewasm_controller_webhooks.AdmissionHook{}, Conversion: []kubewasm_controller_webhooks.ConversionHook{}}
	if c.plugin == nil {
		return declaration
	}
	hooks := c.plugin.Hooks()
	for _, h := range hooks.Admission {
		declaration.Admission = append(declaration.Admission, witHook(h))
	}
	for _, g := range hooks.Conversion {
		declaration.Conversion = append(declaration.Conversion, kubewasm_controller_webhooks.ConversionHook{Resource: witGVK(g)})
	}
	return declaration
}

func fromWitRequest(r kubewasm_controller_webhooks.AdmissionRequest) AdmissionRequest {
	return AdmissionRequest{
		Review: Review{
			Hook:        r.Hook,
			UID:         r.Uid,
			Kind:        fromWitGVK(r.Kind),
			Subresource: r.Subresource.SomeOr(""),
			Namespace:   r.Namespace.SomeOr(""),
			Name:        r.Name,
			Operation:   Operation(r.Operation),
			User:        UserInfo{Username: r.User.Username, UID: r.User.Uid, Groups: r.User.Groups},
			DryRun:      r.DryRun,
		},
		Object:    r.Object.SomeOr(""),
		OldObject: r.OldObject.SomeOr(""),
	}
}

func witDenial(answer AdmissionResponse) kubewasm_controller_webhooks.Denial {
	return kubewasm_controller_webhooks.Denial{Code: uint16(answer.Denial.Code), Message: answer.Denial.Message, Warnings: nonNil(answer.Warnings)}
}

// admitted is the plugin's answer to a hook call; a denial (500) before describe.
func (c *exports) admitted(answer func(AdmissionRequest) AdmissionResponse, request kubewasm_controller_webhooks.AdmissionRequest) AdmissionResponse {
	if c.plugin == nil {
		return AdmissionResponse{Denial: &Denial{Code: 500, Message: beforeDescribe.Message}}
	}
	return answer(fromWitRequest(request))
}

func (c *exports) Validate(request kubewasm_controller_webhooks.AdmissionRequest) witTypes.Result[[]string, kubewasm_controller_webhooks.Denial] {
	c.enter()
	defer c.leave()
	defer c.caught("validate")
	answer := c.admitted(c.plugin.Validate, request)
	if answer.Denial != nil {
		return witTypes.Err[[]string](witDenial(answer))
	}
	return witTypes.Ok[[]string, kubewasm_controller_webhooks.Denial](nonNil(answer.Warnings))
}

func (c *exports) Mutate(request kubewasm_controller_webhooks.AdmissionRequest) witTypes.Result[kubewasm_controller_webhooks.Mutation, kubewasm_controller_webhooks.Denial] {
	c.enter()
	defer c.leave()
	defer c.caught("mutate")
	answer := c.admitted(c.plugin.Mutate, request)
	if answer.Denial != nil {
		return witTypes.Err[kubewasm_controller_webhooks.Mutation](witDenial(answer))
	}
	return witTypes.Ok[kubewasm_controller_webhooks.Mutation, kubewasm_controller_webhooks.Denial](kubewasm_controller_webhooks.Mutation{Object: option(answer.Object), Warnings: nonNil(answer.Warnings)})
}

func (c *exports) Convert(objects []string, desiredAPIVersion string) witTypes.Result[[]string, string] {
	c.enter()
	defer c.leave()
	defer c.caught("convert")
	if c.plugin == nil {
		return witTypes.Err[[]string](beforeDescribe.Message)
	}
	converted, err := c.plugin.Convert(objects, desiredAPIVersion)
	if err != nil {
		return witTypes.Err[[]string](err.Error())
	}
	return witTypes.Ok[[]string, string](converted)
}
