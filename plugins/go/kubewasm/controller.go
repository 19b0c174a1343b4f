package kubewasm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"
)

// Result is what the host does with the key after a successful Reconcile, Finalize or
// Released, as in controller-runtime: the zero Result means done (nothing more until something
// changes, or the periodic resync); a positive RequeueAfter reconciles again after that long
// even if nothing changes, in whole milliseconds rounded up (under a second it means "again
// soon", rate limited like a failure: per-key backoff from 5 ms and the plugin's token bucket).
type Result struct {
	RequeueAfter time.Duration
}

// requeueMillis is the WIT's requeue-after (and resync-after) of a positive delay: whole
// milliseconds, rounded up, so that no positive delay becomes 0 (and the longest Duration does
// not overflow).
func requeueMillis(after time.Duration) uint64 {
	millis := uint64(after / time.Millisecond)
	if after%time.Millisecond != 0 {
		millis++
	}
	return millis
}

// Controller is a controller plugin: what it reconciles (Manifest) and how (Reconcile).
//
// The host makes a fresh instance of the plugin now and then (on load, for concurrency, after
// a fault); each builds its controller once, with the constructor given to Export and the
// settings from NAME.toml beside NAME.wasm, then handles many calls, one at a time.
//
// A panic is a fault, never an error value: the call traps, the instance is replaced, the key
// is retried with backoff, and an object the plugin keeps faulting on is quarantined (set aside
// until it changes). Return an error for what the controller means to report.
//
// A controller may also implement Finalizer, RelatedMapper and Releaser. A declarative
// controller, whose children the host manages from its answers, is a Composite instead.
type Controller interface {
	// Manifest says what the plugin reconciles and what it needs.
	Manifest() *Manifest
	// Reconcile moves the world towards what obj (the primary object, a copy) asks for.
	// Level-triggered: read the current state through ctx, don't assume what changed. An error
	// retries the key with backoff and records a Warning Event with its message (except for
	// code conflict, which only retries).
	Reconcile(ctx *Context, obj Object) (Result, error)
}

// Finalizer is a Controller with a finalizer (Manifest.Finalizer): Finalize cleans up before an
// object carrying it goes away. Result{} lets the host remove the finalizer.
type Finalizer interface {
	Finalize(ctx *Context, obj Object) (Result, error)
}

// RelatedMapper is a Controller with a map-related watch: MapRelated maps an event on a
// watched object to the keys of primary objects to reconcile. It must be quick. The WIT's
// map-related has no error value: an error (like a panic) traps, and the host retries the
// watched object like a faulting Reconcile. No keys means no keys, never a failure.
type RelatedMapper interface {
	MapRelated(ctx *Context, gvk GVK, obj Object) ([]ObjectKey, error)
}

// Releaser overrides what happens when a primary stops matching the manifest's primary selector
// (its labels changed): the controller no longer manages it, but what it made for it is still
// there. By default the objects of the owned kinds it controls are deleted (those the manifest
// may delete), as the garbage collector would had the primary been deleted.
type Releaser interface {
	Released(ctx *Context, obj Object) (Result, error)
}

// NoSettings is the settings type of a plugin that takes none: a NAME.toml with settings in it
// is refused.
type NoSettings struct{}

// Defaulter is implemented by a settings type (on its pointer) that fills in defaults before
// the settings are decoded over them.
type Defaulter interface {
	Default()
}

// described is what a factory builds: a Controller, or a Composite when declarative.
type described interface {
	Manifest() *Manifest
}

// factory builds a controller (or, when declarative, a Composite) from settings JSON text.
type factory struct {
	build       func(settings string) (described, error)
	declarative bool
}

var exported *factory

// stderr takes the stacks of panics: the host log, in a component.
var stderr io.Writer = os.Stderr

// Export makes newController the plugin's constructor: call it from the main package's init.
//
//	func init() { kubewasm.Export(New) }
//	func New(s Settings) (*Controller, error) { ... }
//	func main() {}
//
// The settings (NAME.toml beside NAME.wasm, as JSON) are decoded into S with encoding/json,
// strictly (an unknown field refuses the plugin), over the defaults that S's Default method
// sets, if it has one. An error from newController refuses to load the plugin, with its message.
func Export[S any, C Controller](newController func(settings S) (C, error)) {
	export(factoryOf(newController))
}

func export(f *factory) {
	if exported != nil {
		panic("kubewasm.Export or ExportComposite called twice: a plugin exports one controller")
	}
	exported = f
}

func factoryOf[S any, C Controller](newController func(S) (C, error)) *factory {
	return &factory{build: func(text string) (described, error) {
		settings, err := DecodeSettings[S](text)
		if err != nil {
			return nil, err
		}
		c, err := newController(settings)
		if err != nil {
			return nil, err
		}
		return c, nil
	}}
}

// DecodeSettings decodes settings JSON text as the plugin's describe does: into S's defaults,
// strictly.
func DecodeSettings[S any](text string) (S, error) {
	var settings S
	if d, ok := any(&settings).(Defaulter); ok {
		d.Default()
	}
	trimmed := strings.TrimSpace(text)
	if trimmed == "" || trimmed == "null" || trimmed == "{}" {
		return settings, nil
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&settings); err != nil {
		return settings, fmt.Errorf("settings: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return settings, nil
}

// Plugin runs a controller against a Host: what the component's exports do, minus the WIT
// types. The component wires it to the WIT imports; kubewasmtest wires it to a fake host, so
// unit tests exercise exactly the code the component runs.
type Plugin struct {
	factory *factory
	host    Host
	// controller or composite, as the factory is declarative, once described.
	controller Controller
	composite  Composite
	manifest   *Manifest
	spec       ManifestSpec
	kinds      declaredKinds
}

// NewPlugin is a plugin of the controller newController builds, calling host.
func NewPlugin[S any, C Controller](newController func(S) (C, error), host Host) *Plugin {
	return &Plugin{factory: factoryOf(newController), host: host}
}

// exportedPlugin is the plugin of the controller given to Export.
func exportedPlugin(host Host) (*Plugin, error) {
	if exported == nil {
		return nil, errors.New("no controller: call kubewasm.Export(NewController) (or kubewasm.ExportComposite(NewComposite) for a declarative one) from the main package's init function")
	}
	return &Plugin{factory: exported, host: host}, nil
}

// Describe builds the controller from settings (JSON text) and returns its manifest as the
// host gets it (with the Composition describe-composition answers: a Composite's, nil for a
// Controller). An error refuses to load the plugin; its message says why.
func (p *Plugin) Describe(settings string) (spec ManifestSpec, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
			fmt.Fprintf(stderr, "describe panicked: %v\n%s", r, debug.Stack())
		}
		// The host takes a refusal of at most MaxErrorMessage bytes.
		if err != nil && len(err.Error()) > MaxErrorMessage {
			err = errors.New(cut(err.Error()))
		}
	}()
	built, err := p.factory.build(settings)
	if err != nil {
		return ManifestSpec{}, err
	}
	manifest := built.Manifest()
	if manifest == nil {
		return ManifestSpec{}, errors.New("Manifest() returned nil")
	}
	spec, err = manifest.Spec()
	if err != nil {
		return ManifestSpec{}, err
	}
	if p.factory.declarative {
		if spec.Composition == nil {
			spec.Composition = &Composition{}
		}
		p.composite = built.(Composite)
	} else {
		if spec.Composition != nil {
			return ManifestSpec{}, errors.New("manifest: Child and ChildSelector declare a declarative controller's children: export a Composite with kubewasm.ExportComposite")
		}
		p.controller = built.(Controller)
	}
	p.manifest, p.spec, p.kinds = manifest, spec, declaredKindsOf(spec)
	return spec, nil
}

// context is the Context of one call about key.
func (p *Plugin) context(key ObjectKey, retries int) *Context {
	ctx := NewContext(p.host, key, retries)
	ctx.kinds = p.kinds
	return ctx
}

// Manifest is what Describe returned.
func (p *Plugin) Manifest() ManifestSpec { return p.spec }

// Controller is the controller Describe built (nil before, and for a Composite).
func (p *Plugin) Controller() Controller { return p.controller }

// Rules is what the access export answers, right after Describe: the manifest's rules.
func (p *Plugin) Rules() []Rule { return p.spec.Rules }

// MetadataOnly is what the views export answers, right after Describe: the manifest's
// metadata-only kinds.
func (p *Plugin) MetadataOnly() []GVK { return p.spec.MetadataOnly }

// ReadsFields is what the projections export answers, right after Describe: the fields the
// plugin reads of each kind it declared them for.
func (p *Plugin) ReadsFields() []FieldsRead { return p.spec.ReadsFields }

// ClusterScope is what the clusters export answers, right after Describe: the clusters the
// manifest serves and reaches.
func (p *Plugin) ClusterScope() ClusterScope { return p.spec.Clusters }

// Method names a Plugin.Call: reconcile, finalize or released.
type Method string

const (
	MethodReconcile Method = "reconcile"
	MethodFinalize  Method = "finalize"
	MethodReleased  Method = "released"
)

// Call runs Reconcile, Finalize or Released on the primary obj (JSON text). A failure is an
// *Error as the host gets it: the controller's error's code (other for errors without one) and
// message, cut to MaxErrorMessage. A panic is not recovered: it is a bug, and the component's
// export traps on it (a fault). Calling it on a Composite's plugin panics: the host never does.
func (p *Plugin) Call(method Method, key ObjectKey, obj string, retries int) (result Result, err error) {
	p.reconciling(string(method))
	if p.controller == nil {
		return Result{}, &Error{Code: CodeOther, Message: "the host called the plugin before describe"}
	}
	parsed, perr := parseObject(obj)
	if perr != nil {
		return Result{}, &Error{Code: CodeInvalid, Message: "the primary object does not parse: " + perr.Error()}
	}
	ctx := p.context(key, retries)
	switch method {
	case MethodReconcile:
		result, err = p.controller.Reconcile(ctx, parsed)
	case MethodFinalize:
		if f, ok := p.controller.(Finalizer); ok {
			result, err = f.Finalize(ctx, parsed)
		}
	case MethodReleased:
		if r, ok := p.controller.(Releaser); ok {
			result, err = r.Released(ctx, parsed)
		} else {
			err = ctx.DeleteControlled(parsed, p.manifest.Owned())
		}
	default:
		return Result{}, &Error{Code: CodeOther, Message: "unknown method " + string(method)}
	}
	if err != nil {
		return Result{}, asError(err)
	}
	if result.RequeueAfter < 0 {
		result.RequeueAfter = 0
	}
	return result, nil
}

// MapRelated runs the controller's MapRelated. The WIT function has no error value: the
// component's export traps on an error, as on a panic (not recovered here either).
func (p *Plugin) MapRelated(gvk GVK, obj string) ([]ObjectKey, error) {
	p.reconciling("map-related")
	mapper, ok := p.controller.(RelatedMapper)
	if !ok {
		return nil, nil
	}
	parsed, err := parseObject(obj)
	if err != nil {
		return nil, &Error{Code: CodeInvalid, Message: "the watched object does not parse: " + err.Error()}
	}
	return mapper.MapRelated(p.context(ObjectKey{}, 0), gvk, parsed)
}

// reconciling panics (a trap, in the component) on a reconciler or release call to a
// Composite's plugin: the host never makes one.
func (p *Plugin) reconciling(what string) {
	if p.composite != nil {
		panic(wrongKind(what + " called on a declarative controller: the host never calls it for one"))
	}
}
