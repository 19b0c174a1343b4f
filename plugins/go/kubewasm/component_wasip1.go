//go:build wasip1

// The component side of the SDK, compiled only for WebAssembly (GOOS=wasip1): the Host that
// calls the WIT imports, the WIT exports (exports.go) wired to the exported controller, the
// trap, and the garbage collector guard.
//
// # The garbage collector guard
//
// The host writes a call's arguments, and every host call's results, into the plugin's memory
// through the plugin's allocator (cabi_realloc, a Go function). A garbage collection that
// finishes there reads the wall clock — a WASI import — and a call to an import from inside
// cabi_realloc traps the instance ("cannot leave component instance"). It happens only now and
// then, when a collection happens to end on one of those allocations. So the collector never
// starts by itself while the host may be allocating:
//
//   - it is off (GOGC=off, no memory limit) from start-up on, between calls, and around every
//     host call — turning it off first finishes a collection in progress, in Go code, where
//     reading the clock is allowed;
//   - every export (exports.go: the composite ones too) starts with a full collection
//     (runtime.GC) once 4 MiB have been allocated since the last one: memory stays near what
//     the plugin holds plus 4 MiB;
//   - while the controller's own code runs, a soft memory limit (three quarters of the
//     instance's memory limit) lets the collector run if one call alone allocates that much.
//
// The plugin author never sees any of this: every export and every host call goes through it.
// tests/e2e/go.rs runs 50 000 calls on one instance to keep it honest.

package kubewasm

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"github.com/kubewasm/kubewasm/plugins/go/internal/dispatch"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_cache"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_client"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_events"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_fleet"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_log"
	wit "github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_types"
	witTypes "github.com/kubewasm/kubewasm/plugins/go/internal/witpkg/types"

	// The WIT exports (//go:wasmexport functions) of the plugin.
	_ "github.com/kubewasm/kubewasm/plugins/go/internal/wit/exports/wit_exports"
	// os.Args[0], for libraries that read it while they initialize.
	_ "github.com/kubewasm/kubewasm/plugins/go/internal/argv0"
)

// collectAfter is how much may be allocated before an export starts with a collection.
const collectAfter = 4 << 20

// softLimit is the memory limit while the controller's code runs: three quarters of the
// instance's memory limit (the host's default, 64 MiB, until describe says otherwise).
var softLimit int64 = 48 << 20

var (
	gcSamples = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	// The allocation counter when the last collection was seen, and the cycle count then.
	allocatedAtGC, lastCycles uint64
)

func init() {
	gcOff()
	dispatch.Impl = &exports{
		newPlugin: func() (*Plugin, error) { return exportedPlugin(wasmHost{}) },
		enter:     enter,
		leave:     leave,
		fault:     fault,
		described: func(spec ManifestSpec) {
			memory := uint64(64 << 20)
			if spec.Limits.MemoryBytes > 0 {
				memory = spec.Limits.MemoryBytes
			}
			softLimit = int64(min(memory/4*3, math.MaxInt64))
		},
	}
}

// gcOff keeps the collector from starting, finishing a collection in progress first.
func gcOff() {
	debug.SetMemoryLimit(math.MaxInt64)
	debug.SetGCPercent(-1)
}

// gcOn lets the collector run if the controller's code allocates up to the soft limit.
func gcOn() { debug.SetMemoryLimit(softLimit) }

// enter starts an export: a collection if 4 MiB were allocated since the last one, then the
// collector on (up to the soft limit).
func enter() {
	metrics.Read(gcSamples)
	allocated, cycles := gcSamples[0].Value.Uint64(), gcSamples[1].Value.Uint64()
	if cycles != lastCycles {
		// A collection ran during the last call (the soft limit): count from here.
		allocatedAtGC, lastCycles = allocated, cycles
	}
	if allocated-allocatedAtGC >= collectAfter {
		runtime.GC()
		metrics.Read(gcSamples)
		allocatedAtGC, lastCycles = gcSamples[0].Value.Uint64(), gcSamples[1].Value.Uint64()
	}
	gcOn()
}

// leave ends an export: the collector off before the host reads the results and writes the next
// call's arguments.
func leave() { gcOff() }

// trap executes WebAssembly's `unreachable` (trap_wasip1_wasm.s): the instance traps, a fault.
// An unrecovered Go panic would instead exit the instance (proc_exit), which the host reads as
// an instance that could not run, not as a fault of the call.
func trap()

// fault ends an export that failed without an answer — a panic (r), an error from MapRelated,
// which has no error value, or a call the host never makes to this kind of plugin (a composite
// call to a Controller's, a reconciler or release call to a Composite's) — with the reason and
// the stack in the host log, then a trap: what an uncaught exception or panic is in every SDK.
func fault(what string, reason any) {
	fmt.Fprintf(stderr, "%s: %v\n%s", what, reason, debug.Stack())
	trap()
}

// --- conversions of the imports' results ---

func fromWitError(e wit.Error) *Error { return &Error{Code: ErrorCode(e.Code), Message: e.Message} }

func stringResult(r witTypes.Result[string, wit.Error]) (string, error) {
	if r.IsErr() {
		return "", fromWitError(r.Err())
	}
	return r.Ok(), nil
}

func getResult(r witTypes.Result[witTypes.Option[string], wit.Error]) (string, bool, error) {
	if r.IsErr() {
		return "", false, fromWitError(r.Err())
	}
	found := r.Ok()
	return found.SomeOr(""), found.IsSome(), nil
}

func listResult(r witTypes.Result[[]string, wit.Error]) ([]string, error) {
	if r.IsErr() {
		return nil, fromWitError(r.Err())
	}
	return r.Ok(), nil
}

func unitResult(r witTypes.Result[witTypes.Unit, wit.Error]) error {
	if r.IsErr() {
		return fromWitError(r.Err())
	}
	return nil
}

// --- the Host: the WIT imports, each with the collector off ---

// wasmHost is the call's cluster: the cache, client, events and log imports.
type wasmHost struct{}

func (wasmHost) CacheGet(resource GVK, namespace, name string) (string, bool, error) {
	gcOff()
	r := kubewasm_controller_cache.Get(witGVK(resource), option(namespace), name)
	gcOn()
	return getResult(r)
}

func (wasmHost) CacheList(resource GVK, namespace, labelSelector string) ([]string, error) {
	gcOff()
	r := kubewasm_controller_cache.ListObjects(witGVK(resource), option(namespace), option(labelSelector))
	gcOn()
	return listResult(r)
}

func (wasmHost) CacheListControlled(resource GVK, namespace, owner string) ([]string, error) {
	gcOff()
	r := kubewasm_controller_cache.ListControlled(witGVK(resource), option(namespace), owner)
	gcOn()
	return listResult(r)
}

func (wasmHost) Apply(obj string, force bool) (string, error) {
	gcOff()
	r := kubewasm_controller_client.Apply(obj, force)
	gcOn()
	return stringResult(r)
}

func (wasmHost) ApplyStatus(obj string, force bool) (string, error) {
	gcOff()
	r := kubewasm_controller_client.ApplyStatus(obj, force)
	gcOn()
	return stringResult(r)
}

func (wasmHost) Create(obj string) (string, error) {
	gcOff()
	r := kubewasm_controller_client.Create(obj)
	gcOn()
	return stringResult(r)
}

func (wasmHost) Update(obj string) (string, error) {
	gcOff()
	r := kubewasm_controller_client.Update(obj)
	gcOn()
	return stringResult(r)
}

func (wasmHost) UpdateStatus(obj string) (string, error) {
	gcOff()
	r := kubewasm_controller_client.UpdateStatus(obj)
	gcOn()
	return stringResult(r)
}

func (wasmHost) Patch(resource GVK, namespace, name string, patchType PatchType, body string) (string, error) {
	gcOff()
	r := kubewasm_controller_client.Patch(witGVK(resource), option(namespace), name, uint8(patchType), body)
	gcOn()
	return stringResult(r)
}

func (wasmHost) Delete(resource GVK, namespace, name string) error {
	gcOff()
	r := kubewasm_controller_client.Delete(witGVK(resource), option(namespace), name)
	gcOn()
	return unitResult(r)
}

func (wasmHost) PublishEvent(e Event) error {
	event := kubewasm_controller_events.Event{
		Regarding: wit.ObjectRef{Resource: witGVK(e.Regarding.GVK), Namespace: option(e.Regarding.Namespace), Name: e.Regarding.Name},
		EventType: uint8(e.Type),
		Reason:    e.Reason,
		Action:    e.Action,
		Note:      e.Note,
	}
	gcOff()
	r := kubewasm_controller_events.Publish(event)
	gcOn()
	return unitResult(r)
}

func (wasmHost) Log(level LogLevel, message string, fields []LogField) {
	witFields := make([]kubewasm_controller_log.Field, len(fields))
	for i, f := range fields {
		witFields[i] = kubewasm_controller_log.Field{Key: f.Key, Value: f.Value}
	}
	gcOff()
	kubewasm_controller_log.Emit(uint8(level), message, witFields)
	gcOn()
}

func (wasmHost) Cluster() string {
	gcOff()
	current := kubewasm_controller_fleet.Current()
	gcOn()
	return current.SomeOr("")
}

func (wasmHost) Clusters() []Cluster {
	gcOff()
	clusters := kubewasm_controller_fleet.Clusters()
	gcOn()
	out := make([]Cluster, len(clusters))
	for i, c := range clusters {
		labels := make(map[string]string, len(c.Labels))
		for _, l := range c.Labels {
			labels[l.F0] = l.F1
		}
		out[i] = Cluster{Name: c.Name, Labels: labels}
	}
	return out
}

func (wasmHost) InCluster(name string) ClusterHost { return fleetHost{cluster: option(name)} }

// fleetHost is a named cluster (none: the host's own): the fleet import's functions.
type fleetHost struct{ cluster witTypes.Option[string] }

func (f fleetHost) CacheGet(resource GVK, namespace, name string) (string, bool, error) {
	gcOff()
	r := kubewasm_controller_fleet.Get(f.cluster, witGVK(resource), option(namespace), name)
	gcOn()
	return getResult(r)
}

func (f fleetHost) CacheList(resource GVK, namespace, labelSelector string) ([]string, error) {
	gcOff()
	r := kubewasm_controller_fleet.ListObjects(f.cluster, witGVK(resource), option(namespace), option(labelSelector))
	gcOn()
	return listResult(r)
}

func (f fleetHost) Apply(obj string, force bool) (string, error) {
	gcOff()
	r := kubewasm_controller_fleet.Apply(f.cluster, obj, force)
	gcOn()
	return stringResult(r)
}

func (f fleetHost) ApplyStatus(obj string, force bool) (string, error) {
	gcOff()
	r := kubewasm_controller_fleet.ApplyStatus(f.cluster, obj, force)
	gcOn()
	return stringResult(r)
}

func (f fleetHost) Create(obj string) (string, error) {
	gcOff()
	r := kubewasm_controller_fleet.Create(f.cluster, obj)
	gcOn()
	return stringResult(r)
}

func (f fleetHost) Update(obj string) (string, error) {
	gcOff()
	r := kubewasm_controller_fleet.Update(f.cluster, obj)
	gcOn()
	return stringResult(r)
}

func (f fleetHost) UpdateStatus(obj string) (string, error) {
	gcOff()
	r := kubewasm_controller_fleet.UpdateStatus(f.cluster, obj)
	gcOn()
	return stringResult(r)
}

func (f fleetHost) Patch(resource GVK, namespace, name string, patchType PatchType, body string) (string, error) {
	gcOff()
	r := kubewasm_controller_fleet.Patch(f.cluster, witGVK(resource), option(namespace), name, uint8(patchType), body)
	gcOn()
	return stringResult(r)
}

func (f fleetHost) Delete(resource GVK, namespace, name string) error {
	gcOff()
	r := kubewasm_controller_fleet.Delete(f.cluster, witGVK(resource), option(namespace), name)
	gcOn()
	return unitResult(r)
}

var (
	_ Host        = wasmHost{}
	_ ClusterHost = fleetHost{}
)
