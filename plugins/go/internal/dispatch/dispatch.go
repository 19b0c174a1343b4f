// Package dispatch connects the generated export glue (internal/wit/exports) to the SDK: the
// generated code calls the export_* packages, which call Impl, which the kubewasm package sets
// when built for WebAssembly. It exists to break what would be an import cycle.
package dispatch

import (
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_access"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_clusters"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_composite"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_plugin"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_projections"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_reconciler"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_types"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_webhooks"
	witTypes "github.com/kubewasm/kubewasm/plugins/go/internal/witpkg/types"
)

// Exports are the WIT world's exports, in the generated bindings' types.
type Exports interface {
	Describe(settings string) witTypes.Result[kubewasm_controller_plugin.Manifest, string]
	Reconcile(request kubewasm_controller_reconciler.Request) witTypes.Result[kubewasm_controller_types.Action, kubewasm_controller_types.Error]
	Finalize(request kubewasm_controller_reconciler.Request) witTypes.Result[kubewasm_controller_types.Action, kubewasm_controller_types.Error]
	MapRelated(resource kubewasm_controller_types.Gvk, object string) []kubewasm_controller_types.ObjectKey
	Rules() []kubewasm_controller_access.Rule
	Released(request kubewasm_controller_reconciler.Request) witTypes.Result[kubewasm_controller_types.Action, kubewasm_controller_types.Error]
	MetadataOnly() []kubewasm_controller_types.Gvk
	Projections() []kubewasm_controller_projections.Projection
	Scope() kubewasm_controller_clusters.ClusterScope
	DescribeComposition() witTypes.Option[kubewasm_controller_composite.Composition]
	Customize(parent string) witTypes.Result[[]kubewasm_controller_composite.RelatedRule, kubewasm_controller_types.Error]
	Sync(request kubewasm_controller_composite.SyncRequest) witTypes.Result[kubewasm_controller_composite.SyncResponse, kubewasm_controller_types.Error]
	// FinalizeComposite is composite.finalize (Finalize is reconciler.finalize).
	FinalizeComposite(request kubewasm_controller_composite.SyncRequest) witTypes.Result[kubewasm_controller_composite.SyncResponse, kubewasm_controller_types.Error]
	Declare() kubewasm_controller_webhooks.Declaration
	Validate(request kubewasm_controller_webhooks.AdmissionRequest) witTypes.Result[[]string, kubewasm_controller_webhooks.Denial]
	Mutate(request kubewasm_controller_webhooks.AdmissionRequest) witTypes.Result[kubewasm_controller_webhooks.Mutation, kubewasm_controller_webhooks.Denial]
	Convert(objects []string, desiredAPIVersion string) witTypes.Result[[]string, string]
}

// Impl is set by the kubewasm package's init.
var Impl Exports
