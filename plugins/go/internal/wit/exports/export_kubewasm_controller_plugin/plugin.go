// The SDK's implementation of this export (not generated: scripts/generate.sh keeps it):
// the generated glue in ../wit_exports calls these, and they call the kubewasm package through
// internal/dispatch.
package export_kubewasm_controller_plugin

import (
	"github.com/kubewasm/kubewasm/plugins/go/internal/dispatch"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_plugin"
	witTypes "github.com/kubewasm/kubewasm/plugins/go/internal/witpkg/types"
)

func Describe(settings string) witTypes.Result[kubewasm_controller_plugin.Manifest, string] {
	return dispatch.Impl.Describe(settings)
}
