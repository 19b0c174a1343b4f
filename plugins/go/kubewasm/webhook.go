package kubewasm

// Admission and conversion webhooks (contract 0.1.6), as controller-runtime serves them: a
// plugin declares its hooks in its manifest (Manifest.Webhook, Manifest.Converts) and its
// controller implements CustomValidator, CustomDefaulter or Converter, found by a type
// assertion. The host serves HTTPS, writes the webhook configurations and computes the JSON
// patch of a mutation; a hook may read the cache and log through its Context, never write.

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Operation is what a change does, as the API server names it.
type Operation uint8

const (
	OperationCreate Operation = iota
	OperationUpdate
	OperationDelete
	OperationConnect
)

var operationNames = [...]string{"CREATE", "UPDATE", "DELETE", "CONNECT"}

// String is the operation as an AdmissionReview spells it: "CREATE", "UPDATE", ...
func (o Operation) String() string {
	if int(o) < len(operationNames) {
		return operationNames[o]
	}
	return fmt.Sprintf("operation(%d)", uint8(o))
}

// FailurePolicy is what the API server does when the hook cannot answer (and what the host
// answers when the plugin faults): Fail refuses the change, Ignore lets it through unchanged.
type FailurePolicy uint8

const (
	Fail FailurePolicy = iota
	Ignore
)

// SideEffects says whether calling the hook changes anything outside the object. A plugin's
// hooks cannot write: SideEffectsNone, or SideEffectsNoneOnDryRun for one that logs differently.
type SideEffects uint8

const (
	SideEffectsNone SideEffects = iota
	SideEffectsNoneOnDryRun
)

// MatchCondition is a CEL expression the API server checks before calling the hook
// (matchConditions): the hook is called only when every condition is true.
type MatchCondition struct {
	Name       string
	Expression string
}

// AdmissionHook is one admission hook as the plugin declares it: field for field the WIT
// admission-hook record.
type AdmissionHook struct {
	// Name is unique among the plugin's hooks: a DNS label.
	Name string
	// Mutating hooks are answered by CustomDefaulter, validating ones by CustomValidator.
	Mutating        bool
	Kinds           []GVK
	Operations      []Operation
	FailurePolicy   FailurePolicy
	TimeoutSeconds  uint32
	SideEffects     SideEffects
	MatchConditions []MatchCondition
}

// Webhook builds an AdmissionHook for Manifest.Webhook:
//
//	kubewasm.ValidatingWebhook("validate-cronjob").For(cronJob).Operations(kubewasm.OperationCreate, kubewasm.OperationUpdate)
type Webhook struct {
	hook AdmissionHook
}

// ValidatingWebhook is a validating hook named name (a DNS label, unique in the plugin) for
// CREATE and UPDATE, failing closed, with a 10 s timeout, no side effects and no kinds yet
// (For adds them). The controller answers it as a CustomValidator.
func ValidatingWebhook(name string) *Webhook {
	return &Webhook{hook: AdmissionHook{
		Name:           name,
		Operations:     []Operation{OperationCreate, OperationUpdate},
		FailurePolicy:  Fail,
		TimeoutSeconds: 10,
	}}
}

// MutatingWebhook is a mutating (defaulting) hook, otherwise as ValidatingWebhook. The
// controller answers it as a CustomDefaulter.
func MutatingWebhook(name string) *Webhook {
	w := ValidatingWebhook(name)
	w.hook.Mutating = true
	return w
}

// For admits objects of these kinds.
func (w *Webhook) For(kinds ...GVK) *Webhook {
	w.hook.Kinds = append(w.hook.Kinds, kinds...)
	return w
}

// Operations replaces the operations the hook admits.
func (w *Webhook) Operations(operations ...Operation) *Webhook {
	w.hook.Operations = operations
	return w
}

func (w *Webhook) FailurePolicy(policy FailurePolicy) *Webhook {
	w.hook.FailurePolicy = policy
	return w
}

// Timeout is how long the API server waits for an answer: whole seconds, 1 to 30 (rounded up).
func (w *Webhook) Timeout(timeout time.Duration) *Webhook {
	w.hook.TimeoutSeconds = uint32(min((timeout+time.Second-1)/time.Second, 1<<32-1))
	return w
}

func (w *Webhook) SideEffects(sideEffects SideEffects) *Webhook {
	w.hook.SideEffects = sideEffects
	return w
}

// MatchCondition calls the hook only when the CEL expression is true.
func (w *Webhook) MatchCondition(name, expression string) *Webhook {
	w.hook.MatchConditions = append(w.hook.MatchConditions, MatchCondition{Name: name, Expression: expression})
	return w
}

// Hook is the hook as declared.
func (w *Webhook) Hook() AdmissionHook { return w.hook }

// UserInfo is who asked for a change.
type UserInfo struct {
	Username string
	UID      string
	Groups   []string
}

// Review is one admission request but its objects: which hook, what change, by whom. A hook
// reads it from its Context (Context.Review), as controller-runtime's RequestFromContext.
type Review struct {
	// Hook names the plugin's hook asked.
	Hook string
	UID  string
	// Kind is the object's kind as the hook sees it (one of its kinds).
	Kind        GVK
	Subresource string
	Namespace   string
	// Name is empty on a create whose name the API server generates.
	Name      string
	Operation Operation
	User      UserInfo
	// DryRun: nothing will be stored.
	DryRun bool
}

// AdmissionRequest is a Review with its objects as JSON text ("" for none): what the webhooks
// export's validate and mutate are handed.
type AdmissionRequest struct {
	Review
	// Object is the object as it would be stored (none on delete).
	Object string
	// OldObject is the object as it is (on update and delete).
	OldObject string
}

// Warnings are shown to the user beside an answer (at most 32, each at most 512 bytes), as
// controller-runtime's admission.Warnings.
type Warnings []string

// CustomValidator answers the manifest's validating hooks, as controller-runtime's: nil allows
// the change, with the warnings; an error refuses it (a *Denial with its code, any other error
// with 403 Forbidden), with the warnings too. ctx.Review() is the request; ctx reads the cache,
// and writes and Events are refused. A panic is a fault: the host answers by the hook's failure
// policy. ValidateDelete gets the object as it is.
type CustomValidator interface {
	ValidateCreate(ctx *Context, obj Object) (Warnings, error)
	ValidateUpdate(ctx *Context, oldObj, newObj Object) (Warnings, error)
	ValidateDelete(ctx *Context, obj Object) (Warnings, error)
}

// CustomDefaulter answers the manifest's mutating hooks, as controller-runtime's: Default
// changes obj in place to what should be stored (the host sends the API server the patch); an
// error refuses the change, as for CustomValidator. It is not called on DELETE (there is no
// object to store).
type CustomDefaulter interface {
	Default(ctx *Context, obj Object) error
}

// Converter converts the objects of the custom resources the manifest Converts: obj (a copy) in
// desiredAPIVersion ("group/version"), keeping its kind, name, namespace and UID (of its
// metadata only labels and annotations may change); an error fails the API server's request
// that needed it.
type Converter interface {
	Convert(obj Object, desiredAPIVersion string) (Object, error)
}

// Denial refuses an admission request: an HTTP status the user sees (400 to 599) and why.
type Denial struct {
	Code    int
	Message string
}

func (d *Denial) Error() string { return d.Message }

// Denied is a Denial: 403 Forbidden when in doubt, 422 Unprocessable Entity for an invalid
// object.
func Denied(code int, format string, args ...any) *Denial {
	return &Denial{Code: code, Message: fmt.Sprintf(format, args...)}
}

// MaxDenialMessage is what a denial's message (and a conversion's error) may hold; a longer one
// is cut, at a character boundary (the host would take it as a fault).
const MaxDenialMessage = 4096

// AdmissionResponse is a hook's answer as the host gets it: Denial nil allows the change.
type AdmissionResponse struct {
	Warnings Warnings
	Denial   *Denial
	// Object is, for a mutating hook, the object as it should be stored (JSON text); "" leaves
	// it unchanged.
	Object string
}

// denied is err as the denial the host gets: its *Denial (code and message) when it is or wraps
// one, 403 with its text otherwise; the message cut to MaxDenialMessage.
func denied(err error, warnings Warnings) AdmissionResponse {
	denial := &Denial{Code: 403, Message: err.Error()}
	var d *Denial
	if errors.As(err, &d) {
		denial.Code = d.Code
	}
	denial.Message = cutTo(denial.Message, MaxDenialMessage)
	return AdmissionResponse{Warnings: warnings, Denial: denial}
}

// Hooks is what the webhooks export's declare answers, right after Describe.
type Hooks struct {
	Admission []AdmissionHook
	// Conversion are the custom resources whose versions the plugin converts (their version is
	// ignored).
	Conversion []GVK
}

// Hooks is what the manifest declares.
func (p *Plugin) Hooks() Hooks {
	return Hooks{Admission: p.spec.Webhooks, Conversion: p.spec.Conversions}
}

// served is what Describe built: the Controller, or the Composite.
func (p *Plugin) served() any {
	if p.composite != nil {
		return p.composite
	}
	return p.controller
}

// hookContext is the Context of a hook call: the object's key, and the review.
func (p *Plugin) hookContext(review Review) *Context {
	ctx := p.context(ObjectKey{Namespace: review.Namespace, Name: review.Name}, 0)
	ctx.review = &review
	return ctx
}

// Validate answers a validating hook through the controller's CustomValidator (a 500 denial
// when it is none: the manifest declares a hook nothing answers). A panic is not recovered (in
// the component it traps).
func (p *Plugin) Validate(req AdmissionRequest) AdmissionResponse {
	validator, ok := p.served().(CustomValidator)
	if !ok {
		return denied(Denied(500, "the plugin declares hook %q but implements no kubewasm.CustomValidator", req.Hook), nil)
	}
	ctx := p.hookContext(req.Review)
	var warnings Warnings
	var err error
	switch req.Operation {
	case OperationCreate, OperationUpdate, OperationDelete:
		var obj, old Object
		if obj, old, err = req.objects(); err == nil {
			switch req.Operation {
			case OperationCreate:
				warnings, err = validator.ValidateCreate(ctx, obj)
			case OperationUpdate:
				warnings, err = validator.ValidateUpdate(ctx, old, obj)
			default:
				warnings, err = validator.ValidateDelete(ctx, old)
			}
		}
	default:
		// As controller-runtime's validating handler.
		err = Denied(400, "unknown operation %s", req.Operation)
	}
	if err != nil {
		return denied(err, warnings)
	}
	return AdmissionResponse{Warnings: warnings}
}

// Mutate answers a mutating hook through the controller's CustomDefaulter: the object as it
// should be stored, "" when Default changed nothing (and on DELETE, where it is not called).
func (p *Plugin) Mutate(req AdmissionRequest) AdmissionResponse {
	defaulter, ok := p.served().(CustomDefaulter)
	if !ok {
		return denied(Denied(500, "the plugin declares hook %q but implements no kubewasm.CustomDefaulter", req.Hook), nil)
	}
	if req.Operation == OperationDelete || req.Object == "" {
		return AdmissionResponse{}
	}
	obj, _, err := req.objects()
	if err != nil {
		return denied(err, nil)
	}
	// The object's text as the SDK writes it, to tell whether Default changed it.
	before, err := json.Marshal(obj)
	if err != nil {
		return denied(err, nil)
	}
	if err := defaulter.Default(p.hookContext(req.Review), obj); err != nil {
		return denied(err, nil)
	}
	after, err := json.Marshal(obj)
	if err != nil {
		return denied(Denied(500, "the defaulted object does not encode: %v", err), nil)
	}
	if string(after) == string(before) {
		return AdmissionResponse{}
	}
	return AdmissionResponse{Object: string(after)}
}

// objects parses the request's object and old object (nil when absent); a 400 denial when one
// does not parse or the operation's is missing.
func (req AdmissionRequest) objects() (obj, old Object, err error) {
	parse := func(text, what string, needed bool) (Object, error) {
		if text == "" {
			if needed {
				return nil, Denied(400, "the %s request has no %s", req.Operation, what)
			}
			return nil, nil
		}
		parsed, err := parseObject(text)
		if err != nil {
			return nil, Denied(400, "the %s does not parse: %v", what, err)
		}
		return parsed, nil
	}
	if obj, err = parse(req.Object, "object", req.Operation != OperationDelete); err != nil {
		return nil, nil, err
	}
	old, err = parse(req.OldObject, "old object", req.Operation != OperationCreate)
	return obj, old, err
}

// Convert converts each object (JSON text) to desiredAPIVersion through the controller's
// Converter; the first that cannot be fails the whole request, named. The error's message is
// cut to MaxDenialMessage.
func (p *Plugin) Convert(objects []string, desiredAPIVersion string) ([]string, error) {
	converter, ok := p.served().(Converter)
	if !ok {
		return nil, fmt.Errorf("the plugin declares a conversion but implements no kubewasm.Converter (to %s)", desiredAPIVersion)
	}
	out := make([]string, len(objects))
	for i, text := range objects {
		obj, err := parseObject(text)
		if err != nil {
			return nil, errors.New(cutTo("an object does not parse: "+err.Error(), MaxDenialMessage))
		}
		name := obj.Name()
		converted, err := converter.Convert(obj, desiredAPIVersion)
		if err != nil {
			return nil, errors.New(cutTo(name+": "+err.Error(), MaxDenialMessage))
		}
		encoded, err := json.Marshal(converted)
		if err != nil {
			return nil, errors.New(cutTo(name+": the converted object does not encode: "+err.Error(), MaxDenialMessage))
		}
		out[i] = string(encoded)
	}
	return out, nil
}
