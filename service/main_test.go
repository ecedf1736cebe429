package service

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Run answers -version and -h without starting anything, and reports a
// bad configuration as "mvq ROLE: ..." on stderr.
func TestRunFlagsAndBadConfig(t *testing.T) {
	never := func(context.Context, Config, func(string)) error {
		t.Fatal("the runner started")
		return nil
	}
	env := func(string) string { return "" }
	var out, errOut bytes.Buffer
	if err := Run(context.Background(), "worker", never, []string{"-version"}, env, &out, &errOut); err != nil || !strings.HasPrefix(out.String(), "mvq worker") {
		t.Fatalf("-version: %v, stdout %q", err, out.String())
	}
	out.Reset()
	errOut.Reset()
	if err := Run(context.Background(), "api", never, []string{"-h"}, env, &out, &errOut); err != nil {
		t.Fatalf("-h: %v", err)
	}
	errOut.Reset()
	err := Run(context.Background(), "api", never, []string{"-no-such-flag"}, env, &out, &errOut)
	if err == nil || !strings.Contains(errOut.String(), "\nmvq api: flag provided but not defined: -no-such-flag\n") {
		t.Fatalf("bad flag: %v, stderr %q", err, errOut.String())
	}
}
