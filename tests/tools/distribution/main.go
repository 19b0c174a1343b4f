// Command distribution serves an in-memory OCI registry on loopback for kubewasm's tests: the
// CNCF distribution registry (registry:2, the one Docker Hub, GitLab and Harbor build on), beside
// go-containerregistry's in ../registry, so that push and pull are proven against both. It prints
// "listening on ADDR" once it accepts.
//
// A module of its own: distribution's dependencies stay out of the module helm and crane are
// built in.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()

	config := &configuration.Configuration{}
	config.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	app := handlers.NewApp(context.Background(), config)

	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	fmt.Printf("listening on %s\n", listener.Addr())
	os.Stdout.Sync()
	log.Fatal(http.Serve(listener, app))
}
