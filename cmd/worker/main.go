// Command worker runs refresh work for the clusters in MVQ_CLUSTERS: an
// asynq server on MVQ_REDIS_URL over the warehouse at MVQ_WAREHOUSE.
package main

import "github.com/mvq-dev/mvq/service"

func main() { service.Main("worker", service.RunWorker) }
