package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// etcdServer is an embedded single-member etcd listening on loopback ports chosen by the kernel.
type etcdServer struct {
	*embed.Etcd
}

func startEtcd(dir string) (*etcdServer, error) {
	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = dir
	// Port 0: the kernel picks free ports, so parallel control planes never collide. The peer URL is
	// advertised but never dialled by a single member; it is constant so a restart finds the same
	// membership in its data dir.
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:2380"}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(filepath.Dir(dir), "etcd.log")}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return &etcdServer{e}, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(time.Minute):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("not ready after a minute")
	}
}

func (e *etcdServer) ClientURL() string {
	return "http://" + e.Clients[0].Addr().String()
}
