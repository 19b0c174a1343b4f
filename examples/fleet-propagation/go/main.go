// Fleet propagation as a kubewasm plugin, in Go: a ConfigMap of the hub (the host's own
// cluster) labelled fleet.kubewasm.io/propagate=true is copied, data and all, into the same
// namespace of every member cluster whose labels match the `members` setting (env=prod by
// default). A copy is labelled fleet.kubewasm.io/source=<name>; the finalizer deletes the copies
// before the source goes. A member engaged later gets its copies at once (the host reconciles
// every source again when a member the plugin reaches is engaged); one that does not answer is
// tried again in 30 s without holding up the others.
package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

const (
	propagate = "fleet.kubewasm.io/propagate"
	source    = "fleet.kubewasm.io/source"
	finalizer = "fleet.kubewasm.io/copies"
	// retry is how soon members that did not answer are tried again.
	retry = 30 * time.Second
)

// Settings are fleet-propagation.toml beside fleet-propagation.wasm.
type Settings struct {
	// Members are the member clusters to copy into: a label selector over their labels.
	Members string `json:"members"`
}

func (s *Settings) Default() { s.Members = "env=prod" }

type Propagation struct{ members string }

func New(s Settings) (*Propagation, error) { return &Propagation{members: s.Members}, nil }

func (p *Propagation) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("fleet-propagation", "0.1.0").
		Primary(kinds.ConfigMap).
		PrimarySelector(propagate+"=true").
		ReachMembers(kubewasm.MembersMatching(p.members)).
		Finalizer(finalizer).
		Permission(kinds.ConfigMap, kubewasm.VerbCreate, kubewasm.VerbPatch, kubewasm.VerbDelete)
}

// copyOf is the copy of src a member gets.
func copyOf(src kubewasm.Object) kubewasm.Object {
	copied := kubewasm.NewObject(kinds.ConfigMap, src.Namespace(), src.Name())
	copied.SetLabel(source, src.Name())
	for _, field := range []string{"data", "binaryData", "immutable"} {
		if value, ok := src[field]; ok {
			copied[field] = value
		}
	}
	return copied
}

// inMembers runs each in every member cluster the plugin reaches now: the members where it
// succeeded and those that did not answer (code unavailable, logged). Any other error stops it,
// naming the member.
func inMembers(ctx *kubewasm.Context, each func(member *kubewasm.Context) error) (done, unavailable []string, err error) {
	for _, cluster := range ctx.Clusters() {
		err := each(ctx.InCluster(cluster.Name))
		switch {
		case err == nil:
			done = append(done, cluster.Name)
		case kubewasm.IsUnavailable(err):
			ctx.Warn("member cluster did not answer", "cluster", cluster.Name, "error", err)
			unavailable = append(unavailable, cluster.Name)
		default:
			return nil, nil, fmt.Errorf("cluster %s: %w", cluster.Name, err)
		}
	}
	return done, unavailable, nil
}

// again is the Result of a pass that left out the members that did not answer.
func again(unavailable []string) kubewasm.Result {
	if len(unavailable) > 0 {
		return kubewasm.Result{RequeueAfter: retry}
	}
	return kubewasm.Result{}
}

func (p *Propagation) Reconcile(ctx *kubewasm.Context, src kubewasm.Object) (kubewasm.Result, error) {
	copied := copyOf(src)
	done, unavailable, err := inMembers(ctx, func(member *kubewasm.Context) error {
		_, err := member.Apply(copied)
		return err
	})
	if err != nil {
		return kubewasm.Result{}, err
	}
	note := fmt.Sprintf("copied to %d member cluster(s): %s", len(done), strings.Join(done, ","))
	if len(note) > kubewasm.MaxEventNote {
		// Many members: the note an Event takes, cut at a character boundary.
		note = strings.ToValidUTF8(note[:kubewasm.MaxEventNote-len("…")], "") + "…"
	}
	if err := ctx.Event(src, kubewasm.Normal, "Propagated", "Reconcile", note); err != nil {
		return kubewasm.Result{}, err
	}
	return again(unavailable), nil
}

func (p *Propagation) Finalize(ctx *kubewasm.Context, src kubewasm.Object) (kubewasm.Result, error) {
	_, unavailable, err := inMembers(ctx, func(member *kubewasm.Context) error {
		return kubewasm.IgnoreNotFound(member.Delete(kinds.ConfigMap, src.Namespace(), src.Name()))
	})
	if err != nil {
		return kubewasm.Result{}, err
	}
	return again(unavailable), nil
}

func init() { kubewasm.Export(New) }

func main() {}
