// The SDK's implementation of this export (not generated: scripts/generate.sh keeps it):
// the generated glue in ../wit_exports calls these, and they call the kubewasm package through
// internal/dispatch.
package export_kubewasm_controller_reconciler

import (
	"github.com/kubewasm/kubewasm/plugins/go/internal/dispatch"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_reconciler"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_types"
	witTypes "github.com/kubewasm/kubewasm/plugins/go/internal/witpkg/types"
)

func Reconcile(request kubewasm_controller_reconciler.Request) witTypes.Result[kubewasm_controller_types.Action, kubewasm_controller_types.Error] {
	return dispatch.Impl.Reconcile(request)
}

func Finalize(request kubewasm_controller_reconciler.Request) witTypes.Result[kubewasm_controller_types.Action, kubewasm_controller_types.Error] {
	return dispatch.Impl.Finalize(request)
}

func MapRelated(resource kubewasm_controller_types.Gvk, object string) []kubewasm_controller_types.ObjectKey {
	return dispatch.Impl.MapRelated(resource, object)
}
