// The SDK's implementation of this export (not generated: scripts/generate.sh keeps it):
// the generated glue in ../wit_exports calls these, and they call the kubewasm package through
// internal/dispatch.
package export_kubewasm_controller_webhooks

import (
	"github.com/kubewasm/kubewasm/plugins/go/internal/dispatch"
	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_webhooks"
	witTypes "github.com/kubewasm/kubewasm/plugins/go/internal/witpkg/types"
)

func Declare() kubewasm_controller_webhooks.Declaration {
	return dispatch.Impl.Declare()
}

func Validate(request kubewasm_controller_webhooks.AdmissionRequest) witTypes.Result[[]string, kubewasm_controller_webhooks.Denial] {
	return dispatch.Impl.Validate(request)
}

func Mutate(request kubewasm_controller_webhooks.AdmissionRequest) witTypes.Result[kubewasm_controller_webhooks.Mutation, kubewasm_controller_webhooks.Denial] {
	return dispatch.Impl.Mutate(request)
}

func Convert(objects []string, desiredAPIVersion string) witTypes.Result[[]string, string] {
	return dispatch.Impl.Convert(objects, desiredAPIVersion)
}
