// Command api serves the mvq HTTP API (Lance Namespace REST operations,
// materialized views and refresh jobs).
package main

import "github.com/mvq-dev/mvq/service"

func main() { service.Main("api", service.RunAPI) }
