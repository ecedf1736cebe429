package service_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/service"
)

// flagsOf lists the flags a binary prints for -h, with the variable each
// names in its usage.
func flagsOf(t *testing.T, name string) map[string]string {
	t.Helper()
	var out bytes.Buffer
	_, err := service.LoadConfig(name, []string{"-h"}, func(string) string { return "" }, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("%s -h: %v", name, err)
	}
	flags := map[string]string{}
	re := regexp.MustCompile(`(?m)^  -([a-z-]+)(?: \w+)?\n\s+.*?(?:\((MVQ_[A-Z_]+)\))?(?: \(default .*\))?$`)
	for _, m := range re.FindAllStringSubmatch(out.String(), -1) {
		flags[m[1]] = m[2]
	}
	if len(flags) < 5 {
		t.Fatalf("%s -h: no flags found in %q", name, out.String())
	}
	return flags
}

// TestFlagsAgreeWithTheREADME: every MVQ_* variable of the README's
// configuration table that is not marked "environment only" (nor the JWT
// secret, nor the CLI's) is a flag of the same name on the binaries it
// concerns; every flag names its variable; each binary lists only the
// flags it reads.
func TestFlagsAgreeWithTheREADME(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	bins := map[string]map[string]string{"api": flagsOf(t, "api"), "worker": flagsOf(t, "worker"), "mvq dev": flagsOf(t, "mvq dev")}
	row := regexp.MustCompile("(?m)^\\| `(MVQ_[A-Z_]+)` \\| [^|]* \\| (.*) \\|$")
	documented := map[string]bool{}
	checked := 0
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		name, meaning := m[1], m[2]
		documented[name] = true
		if strings.Contains(meaning, "(environment only)") || name == "MVQ_AUTH_JWT_SECRET" || strings.HasPrefix(meaning, "`mvq` CLI") {
			continue
		}
		want := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "MVQ_")), "_", "-")
		on := []string{"api", "worker"}
		switch {
		case strings.HasPrefix(meaning, "worker:"):
			on = []string{"worker"}
		case strings.HasPrefix(meaning, "API:") || strings.HasPrefix(meaning, "API authentication") || strings.HasPrefix(meaning, "`tokens`") || strings.HasPrefix(meaning, "`jwt`") || name == "MVQ_LISTEN" || name == "MVQ_ALLOW_UNAUTHENTICATED":
			on = []string{"api"}
		}
		checked++
		for _, b := range on {
			if got, ok := bins[b][want]; !ok || got != name {
				t.Errorf("%s: %s has no flag -%s naming it (got %q)", name, b, want, got)
			}
		}
	}
	if checked < 15 {
		t.Fatalf("only %d variables with flags found in the README's table", checked)
	}
	for b, flags := range bins {
		for f, env := range flags {
			if f == "version" {
				continue
			}
			if env == "" || !documented[env] {
				t.Errorf("%s -%s: names no variable of the README's table (%q)", b, f, env)
			}
		}
	}
	for b, absent := range map[string][]string{
		"api":     {"worker-concurrency", "metrics-listen", "max-item-output-rows"},
		"worker":  {"listen", "auth", "max-body-bytes", "query-queue-wait", "trace-url-template"},
		"mvq dev": {"redis-url", "metrics-listen"},
	} {
		for _, f := range absent {
			if _, ok := bins[b][f]; ok {
				t.Errorf("%s lists -%s, which it does not read", b, f)
			}
		}
	}
}

func TestVersionFlagAndStrayArguments(t *testing.T) {
	env := func(string) string { return "" }
	if _, err := service.LoadConfig("worker", []string{"-version"}, env, &bytes.Buffer{}); !errors.Is(err, service.ErrVersion) {
		t.Fatalf("-version: %v", err)
	}
	if _, err := service.LoadConfig("api", []string{"--listen", "127.0.0.1:0", "extra"}, env, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Fatalf("stray argument: %v", err)
	}
	cfg, err := service.LoadConfig("worker", []string{"-worker-concurrency", "3"}, func(k string) string {
		return map[string]string{"MVQ_WORKER_CONCURRENCY": "5"}[k]
	}, &bytes.Buffer{})
	if err != nil || cfg.WorkerConcurrency != 3 {
		t.Fatalf("the flag wins over the variable: %d %v", cfg.WorkerConcurrency, err)
	}
}
