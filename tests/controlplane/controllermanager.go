package main

import (
	"context"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
)

// defaultControllers give real owner-reference garbage collection, namespace deletion, the
// Deployment → ReplicaSet → Pod chain (Pods stay Pending: there is no scheduler or kubelet), and
// ClusterRole aggregation, so that built-in roles such as `edit` carry their real rules (an empty
// `edit` would hide the "attempting to grant RBAC permissions not currently held" refusals real
// clusters give).
var defaultControllers = []string{
	names.ClusterRoleAggregationController,
	names.GarbageCollectorController,
	names.NamespaceController,
	names.ServiceAccountController,
	names.DeploymentController,
	names.ReplicaSetController,
}

func startControllerManager(ctx context.Context, o cliFlags, pki *pki) (*component, error) {
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	all, disabled, aliases := app.KnownControllers(), app.ControllersDisabledByDefault(), app.ControllerAliases()
	named := s.Flags(all, disabled, aliases)
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range named.FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{
		"--kubeconfig=" + filepath.Join(o.dataDir, "controller-manager.kubeconfig"),
		"--controllers=" + o.controllers,
		"--leader-elect=false",
		"--secure-port=0",
		"--root-ca-file=" + pki.CACert(),
		"--service-account-private-key-file=" + pki.ServiceAccountKey(),
		"--use-service-account-credentials=false",
		"--profiling=false",
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	s.ParsedFlags = &named
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	c, err := s.Config(ctx, all, disabled, aliases)
	if err != nil {
		return nil, err
	}
	completed := c.Complete()
	return runComponent(func() error { return app.Run(ctx, completed) }), nil
}
