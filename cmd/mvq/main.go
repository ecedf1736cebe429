// Command mvq is the mvq command line: a client of the HTTP API (tables,
// views, refreshes with live progress, jobs), plus `mvq dev`, which runs
// the API and a worker in one process, and `mvq demo`.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}
