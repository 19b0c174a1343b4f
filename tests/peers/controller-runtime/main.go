// A controller-runtime peer of the suite's e2e guest (tests/guests/e2e in its default `output`
// mode), for the side-by-side density benchmark (tests/benches/density.rs): one manager running
// one controller per name given. Controller NAME reconciles the ConfigMaps labelled
// bench.kubewasm.io/controller=NAME and server-side applies, for each, an output ConfigMap
// `<primary>.NAME` owned by it, with the data the e2e guest writes. Written as a
// controller-runtime user would: the controllers of one manager share its one ConfigMap
// informer, and a predicate gives each its own selection.
//
// Usage: controller-runtime --kubeconfig FILE --namespace NS --controllers c0,c1,... [--metrics-addr ADDR] [--health-addr ADDR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const (
	selectorKey = "bench.kubewasm.io/controller"
	inputKey    = "e2e.kubewasm.io/input"
	pluginKey   = "e2e.kubewasm.io/plugin"
	// What the e2e guest stamps as its variant, so both write the same bytes.
	variant = "v01"
)

// configMapController is one controller; its name is its selector's value and its field manager.
type configMapController struct {
	client.Client
	name string
}

func (c *configMapController) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var primary corev1.ConfigMap
	if err := c.Get(ctx, req.NamespacedName, &primary); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	output := corev1ac.ConfigMap(primary.Name+"."+c.name, primary.Namespace).
		WithLabels(map[string]string{pluginKey: c.name}).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion("v1").WithKind("ConfigMap").
			WithName(primary.Name).WithUID(primary.UID).
			WithController(true).WithBlockOwnerDeletion(true)).
		WithData(map[string]string{
			"input":      primary.Annotations[inputKey],
			"variant":    variant,
			"host":       "",
			"generation": fmt.Sprint(primary.Generation),
		})
	return ctrl.Result{}, c.Apply(ctx, output, client.FieldOwner(c.name), client.ForceOwnership)
}

func main() {
	namespace := flag.String("namespace", "", "the namespace to serve (default: all)")
	names := flag.String("controllers", "c0", "comma-separated controller names")
	metricsAddr := flag.String("metrics-addr", "0", "metrics address (0: off)")
	healthAddr := flag.String("health-addr", "0", "/healthz and /readyz address (0: off)")
	// controller-runtime registers --kubeconfig itself.
	flag.Parse()
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("peer")

	options := ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *healthAddr,
	}
	if *namespace != "" {
		options.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), options)
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	for _, name := range strings.Split(*names, ",") {
		selected, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: map[string]string{selectorKey: name}})
		if err == nil {
			err = builder.ControllerManagedBy(mgr).
				Named(name).
				For(&corev1.ConfigMap{}, builder.WithPredicates(selected)).
				// No Owns(): the e2e guest declares no watch of its outputs, and with one every
				// output written would cost a second reconcile and apply here.
				// The e2e guest's default concurrency.
				WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
				Complete(&configMapController{Client: mgr.GetClient(), name: name})
		}
		if err != nil {
			log.Error(err, "creating a controller", "name", name)
			os.Exit(1)
		}
	}

	// Ready once the ConfigMap informer has synced, as kubewasm's /readyz is once its plugins'
	// caches have: the benchmark starts its clock only then. The informer is made here, before
	// the controllers ask for it, so that there is one to wait for.
	ctx := ctrl.SetupSignalHandler()
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		log.Error(err, "creating the ConfigMap informer")
		os.Exit(1)
	}
	err = mgr.AddReadyzCheck("informers", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the ConfigMap informer has not synced")
		}
		return nil
	})
	if err == nil {
		err = mgr.Start(ctx)
	}
	if err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
