package kubewasm

import (
	"fmt"
	"unicode/utf8"
)

// The sizes the host takes from a plugin (the WIT's doc comments; README "Security model"),
// checked by Context before each host call: an over-long value is the error the host itself
// gives — code invalid, message "<field> is <n> bytes; at most <max>" — so a plugin sees the
// same thing in every SDK and under `kubewasm test`, and the value never crosses the boundary.
const (
	// MaxName bounds metadata.name of keys and refs, and name arguments.
	MaxName      = 253
	MaxNamespace = 63
	MaxGroup     = 253
	MaxVersion   = 63
	MaxKind      = 63
	// MaxObject bounds the JSON text of an object a client call sends.
	MaxObject        = 3 << 20
	MaxPatchBody     = 3 << 20
	MaxLabelSelector = 4096
	// MaxCluster bounds the name of a cluster (Context.InCluster).
	MaxCluster = 253
	// MaxOwner bounds the owner uid of ListControlled (a uid is 36 bytes).
	MaxOwner = 253
	// MaxEventReason bounds an Event's reason and action (each at least 1 byte).
	MaxEventReason = 128
	MaxEventNote   = 1024
	// MaxErrorMessage bounds an error message a plugin returns (and a describe refusal): the
	// host takes no more, and the SDK cuts a longer one.
	MaxErrorMessage = 64 << 10
)

// atMost is an invalid error when value is longer than limit bytes, with the host's message.
func atMost(field, value string, limit int) error {
	if len(value) > limit {
		return &Error{Code: CodeInvalid, Message: fmt.Sprintf("%s is %d bytes; at most %d", field, len(value), limit)}
	}
	return nil
}

func checkGVK(gvk GVK) error {
	if err := atMost("group", gvk.Group, MaxGroup); err != nil {
		return err
	}
	if err := atMost("version", gvk.Version, MaxVersion); err != nil {
		return err
	}
	return atMost("kind", gvk.Kind, MaxKind)
}

// checkTarget checks a resource, namespace and name, in the order the host does.
func checkTarget(gvk GVK, namespace, name string) error {
	if err := checkGVK(gvk); err != nil {
		return err
	}
	if err := atMost("namespace", namespace, MaxNamespace); err != nil {
		return err
	}
	return atMost("name", name, MaxName)
}

// checkEvent checks the text of an Event's reason, action and note.
func checkEvent(e Event) error {
	for _, f := range [...]struct{ field, value string }{{"event reason", e.Reason}, {"event action", e.Action}} {
		if f.value == "" {
			return &Error{Code: CodeInvalid, Message: f.field + " must not be empty"}
		}
		if err := atMost(f.field, f.value, MaxEventReason); err != nil {
			return err
		}
	}
	return atMost("event note", e.Note, MaxEventNote)
}

// cut is message cut to at most MaxErrorMessage bytes, at a character boundary: a longer one
// would be a fault of the plugin, and the start says what went wrong.
func cut(message string) string {
	return cutTo(message, MaxErrorMessage)
}

// cutTo is message cut to at most limit bytes, at a character boundary.
func cutTo(message string, limit int) string {
	if len(message) <= limit {
		return message
	}
	end := limit
	for end > 0 && !utf8.RuneStart(message[end]) {
		end--
	}
	return message[:end]
}
