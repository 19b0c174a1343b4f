package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// component is a control-plane part running in a goroutine of this process.
type component struct {
	done chan error
	err  error
}

func runComponent(f func() error) *component {
	c := &component{done: make(chan error, 1)}
	go func() { c.done <- f() }()
	return c
}

// Done yields the component's exit error once; Wait blocks until it has exited.
func (c *component) Done() <-chan error { return c.done }
func (c *component) Wait() {
	if c.done != nil {
		c.err = <-c.done
		c.done = nil
	}
}

type apiServer struct {
	*component
	url string
}

func (a *apiServer) URL() string { return a.url }

// listen binds the API server's port: the one asked for, else the previous run's (so clients of a
// restarted control plane reconnect to the same address), else any free one.
func listen(o cliFlags) (net.Listener, error) {
	portFile := filepath.Join(o.dataDir, "port")
	if o.port != 0 {
		return net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", o.port))
	}
	if b, err := os.ReadFile(portFile); err == nil {
		if l, err := net.Listen("tcp", "127.0.0.1:"+strings.TrimSpace(string(b))); err == nil {
			return l, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	return l, os.WriteFile(portFile, []byte(port+"\n"), 0o600)
}

func startAPIServer(ctx context.Context, o cliFlags, pki *pki, etcdURL string) (*apiServer, error) {
	policy, err := writeAuditPolicy(o.dataDir)
	if err != nil {
		return nil, err
	}
	s := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--tls-cert-file=" + pki.ServingCert(),
		"--tls-private-key-file=" + pki.ServingKey(),
		"--client-ca-file=" + pki.CACert(),
		"--service-account-key-file=" + pki.ServiceAccountPub(),
		"--service-account-signing-key-file=" + pki.ServiceAccountKey(),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--etcd-compaction-interval=" + o.compactionInterval.String(),
		"--watch-cache=" + strconv.FormatBool(o.watchCache),
		// What clusters hardened for multi-tenancy enable: setting blockOwnerDeletion needs
		// `update` on the owner's finalizers subresource.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		// Every write, with who made it and as whom, in DIR/audit.log (JSON lines).
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + filepath.Join(o.dataDir, "audit.log"),
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=200",
		"--audit-log-maxbackup=1",
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	l, err := listen(o)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.SecureServing.Listener = l
	s.SecureServing.BindPort = l.Addr().(*net.TCPAddr).Port

	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	// The loopback client of the API server itself should not log self-issued warnings.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	completed, err := s.Complete(ctx)
	if err != nil {
		return nil, err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return nil, utilerrors.NewAggregate(errs)
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		return nil, err
	}
	done, err := config.Complete()
	if err != nil {
		return nil, err
	}
	chain, err := app.CreateServerChain(done)
	if err != nil {
		return nil, err
	}
	prepared, err := chain.PrepareRun()
	if err != nil {
		return nil, err
	}
	return &apiServer{
		component: runComponent(func() error { return prepared.Run(ctx) }),
		url:       fmt.Sprintf("https://127.0.0.1:%d", s.SecureServing.BindPort),
	}, nil
}

// auditPolicy records every request that changes something, at the Metadata level (user,
// impersonated user, user agent, verb, object, response code, timestamps), and nothing else:
// tests read it to see who wrote what, and when.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

func writeAuditPolicy(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "audit-policy.yaml")
	if err := os.WriteFile(path, []byte(auditPolicy), 0o600); err != nil {
		return "", fmt.Errorf("audit policy: %w", err)
	}
	return path, nil
}
