// Command controlplane runs a real, single-process Kubernetes control plane for kubewasm's tests
// and demo: embedded etcd, kube-apiserver and the kube-controller-manager controllers that give
// owner-reference garbage collection, namespace deletion and Deployments → ReplicaSets → Pods.
// No scheduler and no kubelet: Pods stay Pending, which is all a controller host needs.
//
// Contract (other parts of the project rely on it):
//
//	controlplane --data-dir DIR --kubeconfig FILE [--unprivileged-kubeconfig FILE] [--port N]
//	             [--etcd-compaction-interval DURATION] [--watch-cache=false] [--controllers LIST]
//
// The API server writes an audit log of every write to DIR/audit.log (JSON lines), and enforces
// OwnerReferencesPermissionEnforcement. It listens on 127.0.0.1 only (--port, else the previous run's port recorded in DIR/port if it is
// free, else any free port), writes the kubeconfig(s) atomically (user kubewasm-admin in
// system:masters; user kubewasm-unprivileged in no group), prints exactly "ready" on stdout once the
// API serves and the built-in resources are discoverable, and on SIGTERM/SIGINT stops everything and
// exits 0 (a second signal during shutdown exits at once). Everything it writes, except the
// kubeconfigs, lives under DIR (logs: DIR/controlplane.log, DIR/etcd.log); restarting on DIR keeps
// all objects.
//
// Build it through the Rust test support (tests/src/build.rs), which caches the binary per machine
// and stamps the Kubernetes version into it (-ldflags -X k8s.io/component-base/version.gitVersion=…);
// a plain `go build` works too but reports version v0.0.0-master.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

type cliFlags struct {
	dataDir                string
	kubeconfig             string
	unprivilegedKubeconfig string
	port                   int
	compactionInterval     time.Duration
	watchCache             bool
	controllers            string
}

func parseFlags(args []string) (cliFlags, error) {
	var o cliFlags
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for etcd data, certificates and logs (required)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "where to write the admin kubeconfig (required)")
	fs.StringVar(&o.unprivilegedKubeconfig, "unprivileged-kubeconfig", "", "where to write a kubeconfig for the unprivileged user "+unprivilegedUser)
	fs.IntVar(&o.port, "port", 0, "API server port on 127.0.0.1 (default: the previous run's port if free, else any free port)")
	fs.DurationVar(&o.compactionInterval, "etcd-compaction-interval", 5*time.Minute, "how often the API server compacts etcd")
	fs.BoolVar(&o.watchCache, "watch-cache", true, "serve watches from the API server's watch cache (false: straight from etcd)")
	fs.StringVar(&o.controllers, "controllers", strings.Join(defaultControllers, ","), "kube-controller-manager controllers to run")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.dataDir == "" || o.kubeconfig == "" {
		return o, errors.New("--data-dir and --kubeconfig are required")
	}
	if o.port < 0 || o.port > 65535 {
		return o, fmt.Errorf("--port %d is not a TCP port", o.port)
	}
	var err error
	if o.dataDir, err = filepath.Abs(o.dataDir); err != nil {
		return o, err
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
}

func run(o cliFlags) error {
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	logFile, err := os.OpenFile(filepath.Join(o.dataDir, "controlplane.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logFile.Close()
	// The components log a lot; stdout carries only "ready" and stderr only our own failures.
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	_ = klogFlags.Set("alsologtostderr", "false")
	_ = klogFlags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(logFile)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	pki, err := ensurePKI(filepath.Join(o.dataDir, "pki"))
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}

	etcd, err := startEtcd(filepath.Join(o.dataDir, "etcd"))
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	apiCtx, cancelAPI := context.WithCancel(context.Background())
	api, err := startAPIServer(apiCtx, o, pki, etcd.ClientURL())
	if err != nil {
		cancelAPI()
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	defer func() {
		cancelAPI()
		api.Wait()
	}()

	if err := writeKubeconfigs(o, pki, api.URL()); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := waitReady(ctx, api, pki, etcd); err != nil {
		return err
	}

	kcmCtx, cancelKCM := context.WithCancel(context.Background())
	kcm, err := startControllerManager(kcmCtx, o, pki)
	if err != nil {
		cancelKCM()
		return fmt.Errorf("kube-controller-manager: %w", err)
	}
	defer func() {
		cancelKCM()
		kcm.Wait()
	}()

	fmt.Println("ready")

	select {
	case <-ctx.Done():
		klog.Info("signal received, shutting down")
		// A second signal gets the default behaviour: exit at once.
		stop()
		return nil
	case err := <-api.Done():
		return fmt.Errorf("kube-apiserver stopped: %v", err)
	case err := <-kcm.Done():
		return fmt.Errorf("kube-controller-manager stopped: %v", err)
	case err := <-etcd.Err():
		return fmt.Errorf("etcd stopped: %v", err)
	}
}

func waitReady(ctx context.Context, api *apiServer, pki *pki, etcd *etcdServer) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var lastErr error
	for {
		if lastErr = checkReady(ctx, api.URL(), pki); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("API server not ready: %v (last check: %v)", ctx.Err(), lastErr)
		case err := <-api.Done():
			return fmt.Errorf("kube-apiserver stopped while starting: %v", err)
		case err := <-etcd.Err():
			return fmt.Errorf("etcd stopped while starting: %v", err)
		case <-ticker.C:
		}
	}
}
