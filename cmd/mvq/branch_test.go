package main

import (
	"testing"

	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
)

// TestRetryKeepsSrcBranch: a retried refresh reads the same branch of the
// source as the job it repeats (its src_version is a version of that
// branch).
func TestRetryKeepsSrcBranch(t *testing.T) {
	b := retryBody(&jobs.Job{Request: refresh.Options{SrcVersion: 3, SrcBranch: "dev"}})
	if b["src_branch"] != "dev" || b["src_version"] != uint64(3) {
		t.Fatalf("retry body %v", b)
	}
	if b := retryBody(&jobs.Job{Request: refresh.Options{}}); b["src_branch"] != nil {
		t.Fatalf("retry body of a main refresh %v", b)
	}
}
