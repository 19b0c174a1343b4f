// The SDK's implementation of this export (not generated: scripts/generate.sh keeps it):
// the generated glue in ../wit_exports calls these, and they call the kubewasm package through
// internal/dispatch.
package export_kubewasm_controller_projections

import (
	"github.com/kubewasm/kubewasm/plugins/go/internal/dispatch"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_projections"
)

func Fields() []kubewasm_controller_projections.Projection {
	return dispatch.Impl.Projections()
}
