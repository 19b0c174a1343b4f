package kubewasm

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorsMatchTheirCodeWithErrorsIs(t *testing.T) {
	err := NewError(CodeConflict, "Foo default/a: the object has been modified")
	wrapped := fmt.Errorf("applying the status: %w", err)
	for _, e := range []error{err, wrapped} {
		if !errors.Is(e, ErrConflict) || !IsConflict(e) {
			t.Errorf("%v does not match ErrConflict", e)
		}
		if errors.Is(e, ErrNotFound) || IsNotFound(e) {
			t.Errorf("%v matches ErrNotFound", e)
		}
		if CodeOf(e) != CodeConflict {
			t.Errorf("CodeOf(%v) = %v", e, CodeOf(e))
		}
		var kw *Error
		if !errors.As(e, &kw) || kw.Message != "Foo default/a: the object has been modified" {
			t.Errorf("errors.As(%v) = %v", e, kw)
		}
	}
	unavailable := fmt.Errorf("cluster eu: %w", NewError(CodeUnavailable, "not engaged"))
	if !IsUnavailable(unavailable) || IsUnavailable(err) || IsForbidden(unavailable) {
		t.Error("IsUnavailable")
	}
	if CodeOf(errors.New("plain")) != CodeOther {
		t.Error("a plain error is code other")
	}
	if IgnoreNotFound(&Error{Code: CodeNotFound, Message: "gone"}) != nil || IgnoreNotFound(err) != err {
		t.Error("IgnoreNotFound")
	}
	// Two errors with messages match only when the messages agree.
	if errors.Is(err, NewError(CodeConflict, "other")) {
		t.Error("different messages matched")
	}
}

func TestErrorTextIsTheMessage(t *testing.T) {
	if got := NewError(CodeForbidden, "no patch on Nodes").Error(); got != "no patch on Nodes" {
		t.Errorf("Error() = %q", got)
	}
	if got := ErrUnavailable.Error(); got != "unavailable" {
		t.Errorf("a sentinel's Error() = %q", got)
	}
	if got := CodeAlreadyExists.String(); got != "already-exists" {
		t.Errorf("code name %q", got)
	}
}

func TestFailuresKeepTheirCodeForTheHost(t *testing.T) {
	cases := []struct {
		err  error
		want Error
	}{
		{NewError(CodeConflict, "stale"), Error{CodeConflict, "stale"}},
		{fmt.Errorf("status: %w", NewError(CodeForbidden, "no")), Error{CodeForbidden, "status: no"}},
		{errors.New("boom"), Error{CodeOther, "boom"}},
	}
	for _, c := range cases {
		if got := asError(c.err); *got != c.want {
			t.Errorf("asError(%v) = %+v, want %+v", c.err, *got, c.want)
		}
	}
}
