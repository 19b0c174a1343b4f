// Command registry serves an in-memory OCI distribution registry on loopback for kubewasm's tests
// (go-containerregistry's reference registry). It prints "listening on ADDR" once it accepts.
//
// A broken registry on demand: `POST /-/tamper` makes every blob it serves afterwards arrive with
// one byte flipped (a digest mismatch a client must catch); `DELETE /-/tamper` stops that.
// `POST /-/omit-location` makes it answer a finished blob upload (201) without the Location
// header, as `crane registry serve` does; `DELETE /-/omit-location` stops that.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()

	var tamper, omitLocation atomic.Bool
	switches := map[string]*atomic.Bool{"/-/tamper": &tamper, "/-/omit-location": &omitLocation}
	reg := registry.New(registry.Logger(log.New(os.Stderr, "registry: ", log.LstdFlags)))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if on, ok := switches[r.URL.Path]; ok {
			on.Store(r.Method == http.MethodPost)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if tamper.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:") {
			reg.ServeHTTP(&flipping{ResponseWriter: w}, r)
			return
		}
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") && omitLocation.Load() {
			reg.ServeHTTP(&unlocating{ResponseWriter: w}, r)
			return
		}
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") {
			repo := strings.TrimPrefix(r.URL.Path[:strings.Index(r.URL.Path, "/blobs/uploads/")], "/v2/")
			reg.ServeHTTP(&locating{ResponseWriter: w, location: "/v2/" + repo + "/blobs/" + r.URL.Query().Get("digest")}, r)
			return
		}
		reg.ServeHTTP(w, r)
	})

	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	fmt.Printf("listening on %s\n", listener.Addr())
	os.Stdout.Sync()
	log.Fatal(http.Serve(listener, handler))
}

// locating adds the Location header that the distribution spec requires on a completed blob
// upload (201 Created) and that go-containerregistry's registry leaves out; oci-client, like
// docker, insists on it.
type locating struct {
	http.ResponseWriter
	location string
}

func (l *locating) WriteHeader(code int) {
	if code == http.StatusCreated && l.Header().Get("Location") == "" {
		l.Header().Set("Location", l.location)
	}
	l.ResponseWriter.WriteHeader(code)
}

// unlocating drops the Location header from a completed blob upload (201 Created), whoever set it.
type unlocating struct {
	http.ResponseWriter
}

func (u *unlocating) WriteHeader(code int) {
	if code == http.StatusCreated {
		u.Header().Del("Location")
	}
	u.ResponseWriter.WriteHeader(code)
}

// flipping flips the first byte of a response body.
type flipping struct {
	http.ResponseWriter
	done bool
}

func (f *flipping) Write(b []byte) (int, error) {
	if !f.done && len(b) > 0 {
		f.done = true
		c := append([]byte{b[0] ^ 0xff}, b[1:]...)
		return f.ResponseWriter.Write(c)
	}
	return f.ResponseWriter.Write(b)
}
