package kubewasmtest

import (
	"fmt"
	"slices"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

// Hooking is the rule the host states when it refuses a write or an Event during a webhook
// call: FakeHost.CacheOnly during Harness.Admit and Harness.Convert.
const Hooking = "webhook calls may read the cache and nothing else"

// AdmissionReview is an admission request for Harness.Admit, as the API server sends it: the
// hook asked, the operation and the objects (Object on create and update, OldObject on update
// and delete); the kind, namespace and name are the object's.
type AdmissionReview struct {
	Hook        string
	Operation   kubewasm.Operation
	Object      kubewasm.Object
	OldObject   kubewasm.Object
	Subresource string
	User        kubewasm.UserInfo
	DryRun      bool
}

// Admission is a hook's answer as the API server gets it.
type Admission struct {
	Allowed  bool
	Warnings []string
	// Code and Message are a denial's (Allowed false).
	Code    int
	Message string
	// Object is what a mutating hook made of the object (nil: unchanged).
	Object kubewasm.Object
}

// Admit calls the manifest's hook review.Hook the way the host does — validating or mutating as
// declared, with writes and Events refused — and returns its answer. The error is a review the
// host would never send (a hook or operation the manifest does not declare); a panic is not
// recovered (in the component it traps, and the host answers by the failure policy).
func (h *Harness) Admit(review AdmissionReview) (Admission, error) {
	i := slices.IndexFunc(h.Manifest.Webhooks, func(hook kubewasm.AdmissionHook) bool { return hook.Name == review.Hook })
	if i < 0 {
		return Admission{}, fmt.Errorf("kubewasmtest: the manifest declares no hook %q", review.Hook)
	}
	hook := h.Manifest.Webhooks[i]
	if !slices.Contains(hook.Operations, review.Operation) {
		return Admission{}, fmt.Errorf("kubewasmtest: hook %q does not admit %s", hook.Name, review.Operation)
	}
	subject := review.Object
	if subject == nil {
		subject = review.OldObject
	}
	request := kubewasm.AdmissionRequest{
		Review: kubewasm.Review{
			Hook:        hook.Name,
			UID:         "review-uid",
			Kind:        subject.GVK(),
			Subresource: review.Subresource,
			Namespace:   subject.Namespace(),
			Name:        subject.Name(),
			Operation:   review.Operation,
			User:        review.User,
			DryRun:      review.DryRun,
		},
		Object:    optionalText(review.Object),
		OldObject: optionalText(review.OldObject),
	}
	defer cacheOnly(h.Host, Hooking)()
	var answer kubewasm.AdmissionResponse
	if hook.Mutating {
		answer = h.Plugin.Mutate(request)
	} else {
		answer = h.Plugin.Validate(request)
	}
	admission := Admission{Allowed: answer.Denial == nil, Warnings: answer.Warnings}
	if answer.Denial != nil {
		admission.Code, admission.Message = answer.Denial.Code, answer.Denial.Message
	}
	if answer.Object != "" {
		admission.Object = Parse(answer.Object)
	}
	return admission, nil
}

// Convert calls the conversion webhook the way the host does, with writes and Events refused:
// objects (of a kind the manifest Converts) to desiredAPIVersion. The error is the plugin's,
// or what the host would refuse as a fault: an answer of another length, or an object whose
// apiVersion is not desiredAPIVersion or whose kind, name, namespace or UID changed.
func (h *Harness) Convert(objects []kubewasm.Object, desiredAPIVersion string) ([]kubewasm.Object, error) {
	texts := make([]string, len(objects))
	for i, obj := range objects {
		gvk := obj.GVK()
		if !slices.ContainsFunc(h.Manifest.Conversions, func(g kubewasm.GVK) bool { return g.Group == gvk.Group && g.Kind == gvk.Kind }) {
			return nil, fmt.Errorf("kubewasmtest: the manifest converts no %s", gvk)
		}
		texts[i] = text(obj)
	}
	defer cacheOnly(h.Host, Hooking)()
	answers, err := h.Plugin.Convert(texts, desiredAPIVersion)
	if err != nil {
		return nil, err
	}
	if len(answers) != len(objects) {
		return nil, fmt.Errorf("kubewasmtest: the host refuses %d objects converted from %d", len(answers), len(objects))
	}
	out := make([]kubewasm.Object, len(answers))
	for i, answer := range answers {
		converted, was := Parse(answer), objects[i]
		if converted.APIVersion() != desiredAPIVersion || converted.Kind() != was.Kind() || converted.Name() != was.Name() || converted.Namespace() != was.Namespace() || converted.UID() != was.UID() {
			return nil, fmt.Errorf("kubewasmtest: the host refuses %s %s converted to %s %s (apiVersion %s wanted; kind, name, namespace and uid kept)",
				was.Kind(), was.Key(), converted.APIVersion(), converted.Kind(), desiredAPIVersion)
		}
		out[i] = converted
	}
	return out, nil
}

// cacheOnly sets host's CacheOnly to rule for a call; the result restores it.
func cacheOnly(host *FakeHost, rule string) func() {
	before := host.CacheOnly
	host.CacheOnly = rule
	return func() { host.CacheOnly = before }
}

// optionalText is obj's JSON text, "" for none (the WIT's none).
func optionalText(obj kubewasm.Object) string {
	if obj == nil {
		return ""
	}
	return text(obj)
}
