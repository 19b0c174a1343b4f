// The SDK's implementation of this export (not generated: scripts/generate.sh keeps it):
// the generated glue in ../wit_exports calls these, and they call the kubewasm package through
// internal/dispatch.
package export_kubewasm_controller_composite

import (
	"github.com/kubewasm/kubewasm/plugins/go/internal/dispatch"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_composite"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_types"
	witTypes "github.com/kubewasm/kubewasm/plugins/go/internal/witpkg/types"
)

func DescribeComposition() witTypes.Option[kubewasm_controller_composite.Composition] {
	return dispatch.Impl.DescribeComposition()
}

func Customize(parent string) witTypes.Result[[]kubewasm_controller_composite.RelatedRule, kubewasm_controller_types.Error] {
	return dispatch.Impl.Customize(parent)
}

func Sync(request kubewasm_controller_composite.SyncRequest) witTypes.Result[kubewasm_controller_composite.SyncResponse, kubewasm_controller_types.Error] {
	return dispatch.Impl.Sync(request)
}

func Finalize(request kubewasm_controller_composite.SyncRequest) witTypes.Result[kubewasm_controller_composite.SyncResponse, kubewasm_controller_types.Error] {
	return dispatch.Impl.FinalizeComposite(request)
}
