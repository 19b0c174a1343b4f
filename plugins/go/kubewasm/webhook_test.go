package kubewasm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kubewasm/kubewasm/plugins/go/internal/wit/imports/kubewasm_controller_webhooks"
	witTypes "github.com/kubewasm/kubewasm/plugins/go/internal/witpkg/types"
)

var widget = GVK{Group: "example.com", Version: "v1", Kind: "Widget"}

// hooked validates (denying a widget named "bad" with 422) and defaults spec.size.
type hooked struct{}

func (hooked) Reconcile(*Context, Object) (Result, error) { return Result{}, nil }

func (hooked) Manifest() *Manifest {
	return NewManifest("hooked", "0.1.0").Primary(widget).
		Webhook(ValidatingWebhook("check").For(widget).Operations(OperationCreate).FailurePolicy(Ignore).MatchCondition("not-system", "true")).
		Webhook(MutatingWebhook("size").For(widget).Timeout(2500 * time.Millisecond)).
		Converts(widget)
}

func (hooked) ValidateCreate(ctx *Context, obj Object) (Warnings, error) {
	if obj.Name() == "bad" {
		return Warnings{"named bad"}, Denied(422, "%s is bad (asked by %s)", obj.Name(), ctx.Review().User.Username)
	}
	return nil, nil
}

func (hooked) ValidateUpdate(*Context, Object, Object) (Warnings, error) {
	return nil, errors.New("no updates")
}
func (hooked) ValidateDelete(*Context, Object) (Warnings, error) { return nil, nil }

func (hooked) Default(_ *Context, obj Object) error {
	obj.SetField("m", "spec", "size")
	return nil
}

func request(hook string, obj Object) kubewasm_controller_webhooks.AdmissionRequest {
	text, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return kubewasm_controller_webhooks.AdmissionRequest{
		Hook:      hook,
		Kind:      witGVK(widget),
		Namespace: witTypes.Some("default"),
		Name:      obj.Name(),
		Operation: kubewasm_controller_webhooks.Operation_Create,
		User:      kubewasm_controller_webhooks.UserInfo{Username: "alice", Groups: []string{}},
		Object:    witTypes.Some(string(text)),
		OldObject: witTypes.None[string](),
	}
}

func TestTheWebhooksExportDeclaresAndAnswersInWITTypes(t *testing.T) {
	g := newGlue(func() *Plugin {
		return NewPlugin(func(NoSettings) (hooked, error) { return hooked{}, nil }, &recordingHost{})
	})
	if d := g.Declare(); len(d.Admission) != 0 || len(d.Conversion) != 0 {
		t.Errorf("nothing before describe: %+v", d)
	}
	g.Describe("")
	d := g.Declare()
	if len(d.Admission) != 2 || d.Admission[0].FailurePolicy != kubewasm_controller_webhooks.FailurePolicy_Ignore || d.Admission[0].Operations[0] != kubewasm_controller_webhooks.Operation_Create ||
		!d.Admission[1].Mutating || d.Admission[1].TimeoutSeconds != 3 || len(d.Admission[0].MatchConditions) != 1 || d.Conversion[0].Resource.Kind != "Widget" {
		t.Errorf("%+v", d)
	}
	if got := g.Validate(request("check", NewObject(widget, "default", "good"))); got.IsErr() || len(got.Ok()) != 0 {
		t.Errorf("allowed: %+v", got)
	}
	denied := g.Validate(request("check", NewObject(widget, "default", "bad")))
	if !denied.IsErr() || denied.Err().Code != 422 || denied.Err().Message != "bad is bad (asked by alice)" || denied.Err().Warnings[0] != "named bad" {
		t.Errorf("denied: %+v", denied)
	}
	mutated := g.Mutate(request("size", NewObject(widget, "default", "w")))
	if mutated.IsErr() || !strings.Contains(mutated.Ok().Object.Some(), `"size":"m"`) {
		t.Errorf("mutated: %+v", mutated)
	}
	if converted := g.Convert([]string{`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`}, "example.com/v2"); !converted.IsErr() || !strings.Contains(converted.Err(), "implements no kubewasm.Converter") {
		t.Errorf("a declared conversion without a Converter: %+v", converted)
	}
	if g.entered != g.left {
		t.Errorf("the guard: %d entered, %d left", g.entered, g.left)
	}
}
