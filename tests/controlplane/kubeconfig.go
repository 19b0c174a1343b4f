package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func restConfig(pki *pki, server, user string) *rest.Config {
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   pki.CACert(),
			CertFile: pki.ClientCert(user),
			KeyFile:  pki.ClientKey(user),
		},
	}
}

// writeKubeconfig writes a self-contained kubeconfig (credentials embedded) atomically, so a
// reader polling for the file never sees half of it.
func writeKubeconfig(path string, pki *pki, server, user string) error {
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }
	ca, err := read(pki.CACert())
	if err != nil {
		return err
	}
	cert, err := read(pki.ClientCert(user))
	if err != nil {
		return err
	}
	key, err := read(pki.ClientKey(user))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubewasm"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["kubewasm"] = &clientcmdapi.Context{Cluster: "kubewasm", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "kubewasm"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func writeKubeconfigs(o cliFlags, pki *pki, server string) error {
	if err := writeKubeconfig(o.kubeconfig, pki, server, adminUser); err != nil {
		return err
	}
	// The controller manager gets its own copy inside DIR so the user's file can be moved freely.
	if err := writeKubeconfig(filepath.Join(o.dataDir, "controller-manager.kubeconfig"), pki, server, adminUser); err != nil {
		return err
	}
	if o.unprivilegedKubeconfig != "" {
		return writeKubeconfig(o.unprivilegedKubeconfig, pki, server, unprivilegedUser)
	}
	return nil
}

// requiredGroupVersions are what kubewasm and its tests use; "ready" waits until all are served.
var requiredGroupVersions = []string{
	"v1", "apps/v1", "coordination.k8s.io/v1", "events.k8s.io/v1",
	"apiextensions.k8s.io/v1", "rbac.authorization.k8s.io/v1",
}

func checkReady(ctx context.Context, server string, pki *pki) error {
	cfg := restConfig(pki, server, adminUser)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		return err
	}
	served := map[string]bool{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			served[v.GroupVersion] = true
		}
	}
	for _, gv := range requiredGroupVersions {
		if !served[gv] {
			return fmt.Errorf("%s not discoverable yet", gv)
		}
	}
	return nil
}
