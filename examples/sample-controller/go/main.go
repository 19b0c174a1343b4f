// The Kubernetes sample-controller (k8s.io/sample-controller) as a kubewasm plugin, in Go.
//
// A Foo (samplecontroller.k8s.io/v1alpha1) asks for an nginx Deployment named
// spec.deploymentName with spec.replicas replicas (default 1). The controller applies that
// Deployment, owned by the Foo, and reports the Deployment's available replicas and the Foo's
// observed generation in the Foo's status. A Deployment of that name that the Foo does not
// control is left alone, with a Warning Event on the Foo.
package main

import (
	"fmt"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// Foo is the sample-controller's custom resource.
var Foo = kubewasm.GVK{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"}

// FooSpec is what a Foo asks for.
type FooSpec struct {
	DeploymentName string `json:"deploymentName"`
	Replicas       *int64 `json:"replicas"`
}

type SampleController struct{}

func New(kubewasm.NoSettings) (*SampleController, error) { return &SampleController{}, nil }

func (*SampleController) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("sample-controller", "0.1.0").
		Primary(Foo).
		Owns(kinds.Deployment).
		Permission(kinds.Deployment, kubewasm.VerbCreate, kubewasm.VerbPatch).
		StatusPermission(Foo, kubewasm.VerbPatch).
		// Parse only what is read: a Foo's spec, a Deployment's available replicas (and, of
		// both, the metadata, which every object keeps).
		ReadsFields(Foo, "spec").
		ReadsFields(kinds.Deployment, "status.availableReplicas").
		MaxConcurrency(2)
}

func (*SampleController) Reconcile(ctx *kubewasm.Context, foo kubewasm.Object) (kubewasm.Result, error) {
	var spec FooSpec
	if err := foo.Decode(&spec, "spec"); err != nil {
		return kubewasm.Result{}, err
	}
	if spec.DeploymentName == "" {
		err := ctx.Event(foo, kubewasm.Warning, "InvalidSpec", "Reconcile", "spec.deploymentName must be set")
		return kubewasm.Result{}, err
	}

	existing, err := ctx.Get(kinds.Deployment, foo.Namespace(), spec.DeploymentName)
	if kubewasm.IgnoreNotFound(err) != nil {
		return kubewasm.Result{}, err
	}
	if existing != nil && !existing.IsControlledBy(foo) {
		note := fmt.Sprintf("Resource %q already exists and is not managed by Foo", spec.DeploymentName)
		return kubewasm.Result{}, ctx.Event(foo, kubewasm.Warning, "ErrResourceExists", "Reconcile", note)
	}

	replicas := int64(1)
	if spec.Replicas != nil {
		replicas = *spec.Replicas
	}
	deployment, err := ctx.Apply(deploymentFor(foo, spec.DeploymentName, replicas))
	if err != nil {
		return kubewasm.Result{}, err
	}

	available, _ := deployment.Int64("status", "availableReplicas")
	status := map[string]any{"availableReplicas": available, "observedGeneration": foo.Generation()}
	if _, err := ctx.ApplyStatus(foo.StatusObject(status)); err != nil {
		return kubewasm.Result{}, err
	}
	return kubewasm.Result{}, nil
}

// deploymentFor is the Deployment a Foo asks for, owned by the Foo.
func deploymentFor(foo kubewasm.Object, name string, replicas int64) kubewasm.Object {
	labels := map[string]any{"app": "nginx", "controller": foo.Name()}
	deployment := kubewasm.NewObject(kinds.Deployment, foo.Namespace(), name)
	deployment.SetField([]any{foo.ControllerOwnerRef()}, "metadata", "ownerReferences")
	deployment["spec"] = map[string]any{
		"replicas": replicas,
		"selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{
			"metadata": map[string]any{"labels": labels},
			"spec": map[string]any{
				"containers": []any{map[string]any{"name": "nginx", "image": "nginx:latest"}},
			},
		},
	}
	return deployment
}

func init() { kubewasm.Export(New) }

func main() {}
