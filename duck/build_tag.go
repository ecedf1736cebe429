//go:build !duckdb_arrow

package duck

// mvq needs DuckDB's Arrow interface, which duckdb-go compiles only with
// the duckdb_arrow build tag. Without it, this declaration is the first
// error a build reports, and it says what to do.
var _ int = "mvq must be built with -tags=duckdb_arrow: run `make build`, or export GOFLAGS=-tags=duckdb_arrow before go build/test/run"
