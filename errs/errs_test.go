package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestCodeOfAndRetryable(t *testing.T) {
	wrapped := fmt.Errorf("loading: %w", Errorf(CodeJobNotFound, "job %s not found", "j1"))
	if CodeOf(wrapped) != CodeJobNotFound || wrapped.Error() != "loading: job j1 not found" {
		t.Fatalf("CodeOf %v, message %q", CodeOf(wrapped), wrapped)
	}
	if CodeOf(errors.New("plain")) != CodeInternal || CodeOf(nil) != CodeInternal {
		t.Fatal("an uncoded error is internal")
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("connection reset"), true},
		{Errorf(CodeInternal, "x"), true},
		{Errorf(CodeServiceUnavailable, "x"), true},
		{Errorf(CodeConcurrentModification, "x"), true},
		{Errorf(CodeThrottling, "x"), true},
		{Errorf(CodeInvalidInput, "x"), false},
		{Errorf(CodeTableNotFound, "x"), false},
		{fmt.Errorf("wrapped: %w", Errorf(CodeJobNotFound, "x")), false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	cause := errors.New("disk full")
	e := &Error{Code: CodeInternal, Message: "write manifest", Err: cause}
	if !errors.Is(e, cause) || e.Error() != "write manifest: disk full" {
		t.Fatalf("%v does not wrap its cause", e)
	}
}

func TestEveryCodeHasATitle(t *testing.T) {
	for c := CodeUnsupported; c <= CodeTableBranchAlreadyExists; c++ {
		if _, ok := titles[c]; !ok {
			t.Errorf("code %d has no title", c)
		}
	}
	if Title(CodeJobNotFound) != "Job not found" || Title(Code(9999)) != Title(CodeInternal) {
		t.Fatal("titles")
	}
}
