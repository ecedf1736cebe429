// Command mvq is the mvq command line: a client of the HTTP API (tables,
// views, refreshes with live progress, jobs), plus `mvq dev`, which runs
// the API and a worker in one process, and `mvq demo`.
//
// Run under the name api or worker (make build links bin/api and
// bin/worker to bin/mvq), it is that service, exactly as cmd/api and
// cmd/worker build it: one binary of DuckDB's size instead of three.
package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/mvq-dev/mvq/service"
)

func main() {
	switch strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") {
	case "api":
		service.Main("api", service.RunAPI)
		return
	case "worker":
		service.Main("worker", service.RunWorker)
		return
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}
