package kubewasmtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
)

var (
	cronJobV1 = kubewasm.GVK{Group: "batch.tutorial.kubebuilder.io", Version: "v1", Kind: "CronJob"}
	cronJobV2 = kubewasm.GVK{Group: "batch.tutorial.kubebuilder.io", Version: "v2", Kind: "CronJob"}
)

// cronJobHooks is the kubebuilder tutorial's CronJob webhooks, cut down: a defaulter, a
// validator and a v1 <-> v2 converter.
type cronJobHooks struct{}

func newCronJobHooks(kubewasm.NoSettings) (*cronJobHooks, error) { return &cronJobHooks{}, nil }

func (*cronJobHooks) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("cronjob", "0.1.0").
		Primary(cronJobV1).
		Webhook(kubewasm.MutatingWebhook("default-cronjob").For(cronJobV1).Operations(kubewasm.OperationCreate, kubewasm.OperationUpdate)).
		Webhook(kubewasm.ValidatingWebhook("validate-cronjob").For(cronJobV1).Operations(kubewasm.OperationCreate, kubewasm.OperationUpdate, kubewasm.OperationDelete)).
		Converts(cronJobV1)
}

func (*cronJobHooks) Reconcile(*kubewasm.Context, kubewasm.Object) (kubewasm.Result, error) {
	return kubewasm.Result{}, nil
}

func (*cronJobHooks) Default(ctx *kubewasm.Context, obj kubewasm.Object) error {
	if _, ok := obj.Field("spec", "concurrencyPolicy"); !ok {
		obj.SetField("Allow", "spec", "concurrencyPolicy")
	}
	return nil
}

func (*cronJobHooks) ValidateCreate(ctx *kubewasm.Context, obj kubewasm.Object) (kubewasm.Warnings, error) {
	if ctx.Review().Hook != "validate-cronjob" {
		return nil, errors.New("the review names another hook")
	}
	if reason, _ := obj.String("spec", "reason"); reason != "" {
		return kubewasm.Warnings{"refused"}, kubewasm.Denied(422, "%s", reason)
	}
	if len(obj.Name()) > 52 {
		return nil, errors.New("metadata.name: must be no more than 52 characters")
	}
	return kubewasm.Warnings{"spec.startingDeadlineSeconds is unset"}, nil
}

func (*cronJobHooks) ValidateUpdate(ctx *kubewasm.Context, oldObj, newObj kubewasm.Object) (kubewasm.Warnings, error) {
	// A hook never writes: the host refuses it.
	if _, err := ctx.Apply(kubewasm.NewObject(cronJobV1, "default", "side-effect")); !errors.Is(err, kubewasm.ErrForbidden) {
		return nil, errors.New("a write was not refused")
	}
	return nil, nil
}

func (*cronJobHooks) ValidateDelete(*kubewasm.Context, kubewasm.Object) (kubewasm.Warnings, error) {
	return nil, nil
}

// Convert moves spec.schedule (v1, a cron string) to spec.schedule.cron (v2), and back.
func (*cronJobHooks) Convert(obj kubewasm.Object, desiredAPIVersion string) (kubewasm.Object, error) {
	switch desiredAPIVersion {
	case cronJobV2.APIVersion():
		schedule, _ := obj.String("spec", "schedule")
		obj.SetField(map[string]any{"cron": schedule}, "spec", "schedule")
	case cronJobV1.APIVersion():
		schedule, _ := obj.String("spec", "schedule", "cron")
		obj.SetField(schedule, "spec", "schedule")
	default:
		return nil, errors.New("unknown version " + desiredAPIVersion)
	}
	obj["apiVersion"] = desiredAPIVersion
	return obj, nil
}

func cronJob(name string, spec map[string]any) kubewasm.Object {
	obj := kubewasm.NewObject(cronJobV1, "default", name)
	obj["spec"] = spec
	return obj
}

func TestTheHooksAreDeclared(t *testing.T) {
	h := New(t, newCronJobHooks)
	hooks := h.Plugin.Hooks()
	if len(hooks.Admission) != 2 || !hooks.Admission[0].Mutating || hooks.Admission[1].Mutating || hooks.Admission[1].TimeoutSeconds != 10 {
		t.Errorf("%+v", hooks.Admission)
	}
	if len(hooks.Conversion) != 1 || hooks.Conversion[0] != cronJobV1 {
		t.Errorf("%+v", hooks.Conversion)
	}
}

func TestAValidatorAllowsWithWarningsAndDenies(t *testing.T) {
	h := New(t, newCronJobHooks)
	got, err := h.Admit(AdmissionReview{Hook: "validate-cronjob", Operation: kubewasm.OperationCreate, Object: cronJob("ok", nil)})
	if err != nil || !got.Allowed || len(got.Warnings) != 1 || got.Warnings[0] != "spec.startingDeadlineSeconds is unset" {
		t.Errorf("allowed with a warning: %+v %v", got, err)
	}
	got, _ = h.Admit(AdmissionReview{Hook: "validate-cronjob", Operation: kubewasm.OperationCreate, Object: cronJob(strings.Repeat("n", 53), nil)})
	if got.Allowed || got.Code != 403 || got.Message != "metadata.name: must be no more than 52 characters" {
		t.Errorf("a plain error is a 403: %+v", got)
	}
	got, _ = h.Admit(AdmissionReview{Hook: "validate-cronjob", Operation: kubewasm.OperationCreate, Object: cronJob("bad", map[string]any{"reason": "bad schedule"})})
	if got.Allowed || got.Code != 422 || got.Message != "bad schedule" || len(got.Warnings) != 1 {
		t.Errorf("a Denial keeps its code and the warnings: %+v", got)
	}
	got, _ = h.Admit(AdmissionReview{Hook: "validate-cronjob", Operation: kubewasm.OperationUpdate, Object: cronJob("ok", nil), OldObject: cronJob("ok", nil)})
	if _, stored := h.Host.Object(cronJobV1, "default", "side-effect"); !got.Allowed || stored {
		t.Errorf("a write is refused, and nothing stored: %+v", got)
	}
	if _, err := h.Admit(AdmissionReview{Hook: "nope", Operation: kubewasm.OperationCreate, Object: cronJob("ok", nil)}); err == nil {
		t.Error("an undeclared hook is the test's mistake")
	}
}

func TestALongDenialIsCutAtACharacterBoundary(t *testing.T) {
	h := New(t, newCronJobHooks)
	// 4095 bytes, then a 2-byte character across the bound.
	reason := strings.Repeat("x", kubewasm.MaxDenialMessage-1) + "é" + strings.Repeat("y", 100)
	got, _ := h.Admit(AdmissionReview{Hook: "validate-cronjob", Operation: kubewasm.OperationCreate, Object: cronJob("long", map[string]any{"reason": reason})})
	if got.Allowed || got.Message != reason[:kubewasm.MaxDenialMessage-1] {
		t.Errorf("cut to %d bytes", len(got.Message))
	}
}

func TestADefaulterChangesTheObject(t *testing.T) {
	h := New(t, newCronJobHooks)
	got, err := h.Admit(AdmissionReview{Hook: "default-cronjob", Operation: kubewasm.OperationCreate, Object: cronJob("a", map[string]any{"schedule": "* * * * *"})})
	if policy, _ := got.Object.String("spec", "concurrencyPolicy"); err != nil || !got.Allowed || policy != "Allow" || got.Object.Name() != "a" {
		t.Errorf("defaulted: %+v %v", got, err)
	}
	got, _ = h.Admit(AdmissionReview{Hook: "default-cronjob", Operation: kubewasm.OperationCreate, Object: cronJob("a", map[string]any{"concurrencyPolicy": "Forbid"})})
	if !got.Allowed || got.Object != nil {
		t.Errorf("nothing to default: unchanged (%v)", got.Object)
	}
}

func TestAConverterChangesTheVersionAndKeepsTheName(t *testing.T) {
	h := New(t, newCronJobHooks)
	v1 := cronJob("a", map[string]any{"schedule": "*/5 * * * *"})
	v2, err := h.Convert([]kubewasm.Object{v1}, cronJobV2.APIVersion())
	if cron, _ := v2[0].String("spec", "schedule", "cron"); err != nil || v2[0].APIVersion() != cronJobV2.APIVersion() || v2[0].Name() != "a" || cron != "*/5 * * * *" {
		t.Fatalf("to v2: %v %v", v2, err)
	}
	back, err := h.Convert(v2, cronJobV1.APIVersion())
	if err != nil || !Equal(back[0], v1) {
		t.Errorf("and back: %v %v", back, err)
	}
	if _, err := h.Convert([]kubewasm.Object{v1}, "batch.tutorial.kubebuilder.io/v3"); err == nil || err.Error() != "a: unknown version batch.tutorial.kubebuilder.io/v3" {
		t.Errorf("the failure names the object: %v", err)
	}
}
