// Package argv0 gives a plugin a program name. The host passes a plugin no arguments at all, so
// os.Args is empty, and common libraries read os.Args[0] while they initialize — k8s.io/klog,
// which k8s.io/api pulls in, panics at start-up without it. The kubewasm package imports this one;
// since Go 1.21 packages initialize in import-path order among those whose imports are ready, and
// this one needs only os, it runs before any such library (k8s.io/..., sigs.k8s.io/...).
package argv0

import "os"

// Name is os.Args[0] when the host gives none.
const Name = "kubewasm-plugin"

func init() {
	if len(os.Args) == 0 {
		os.Args = []string{Name}
	}
}
