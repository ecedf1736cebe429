package service

import (
	"fmt"
	"strconv"
	"time"

	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/jobs"
)

// HTTPLimits are the API's bounds on what one request, one principal and
// all of them together may hold (environment only). Zero fields take the
// defaults of httpapi and jobs.
type HTTPLimits struct {
	// MVQ_MAX_JSON_BODY_BYTES (default 1 MiB): the body limit of every
	// route but the record routes (create, insert, merge_insert), which
	// keep MVQ_MAX_BODY_BYTES.
	MaxJSONBodyBytes int64
	// MVQ_BODY_READ_TIMEOUT (default 10s; 0: none) and
	// MVQ_BODY_MIN_BYTES_PER_SECOND (default 65536; 0: none): a body must
	// arrive within the timeout plus one second per that many bytes.
	BodyReadTimeout       time.Duration
	BodyMinBytesPerSecond int64
	// MVQ_SPOOL_BUDGET_BYTES (default 256 MiB) and
	// MVQ_SPOOL_PRINCIPAL_BYTES (default 64 MiB): the memory of spooled
	// query results, in all and per principal; beyond, temporary files.
	SpoolBudgetBytes    int64
	SpoolPrincipalBytes int64
	// MVQ_MAX_EVENT_STREAMS (default 128) and
	// MVQ_MAX_EVENT_STREAMS_PER_PRINCIPAL (default 16): job event streams
	// open at once; beyond, 429. The streams read Redis through a pool of
	// their own, MVQ_MAX_EVENT_STREAMS connections.
	MaxEventStreams             int
	MaxEventStreamsPerPrincipal int
	// MVQ_IDEMPOTENCY_MAX_KEYS (default 1000): the Idempotency-Key
	// records one principal keeps; beyond, its oldest go.
	IdempotencyMaxKeys int
}

// loadHTTPLimits reads the MVQ_* variables of HTTPLimits.
func loadHTTPLimits(getenv func(string) string) (HTTPLimits, error) {
	var l HTTPLimits
	var streams, perStreams, idem int64
	ints := []struct {
		key string
		dst *int64
		off int64 // what "0" becomes (-1: none), or 0 where 0 is refused
	}{
		{"MVQ_MAX_JSON_BODY_BYTES", &l.MaxJSONBodyBytes, 0},
		{"MVQ_BODY_MIN_BYTES_PER_SECOND", &l.BodyMinBytesPerSecond, -1},
		{"MVQ_SPOOL_BUDGET_BYTES", &l.SpoolBudgetBytes, 0},
		{"MVQ_SPOOL_PRINCIPAL_BYTES", &l.SpoolPrincipalBytes, 0},
		{"MVQ_MAX_EVENT_STREAMS", &streams, 0},
		{"MVQ_MAX_EVENT_STREAMS_PER_PRINCIPAL", &perStreams, 0},
		{"MVQ_IDEMPOTENCY_MAX_KEYS", &idem, 0},
	}
	for _, i := range ints {
		v := getenv(i.key)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || (n == 0 && i.off == 0) || n > 1<<40 {
			if i.off != 0 {
				return l, fmt.Errorf("%s %q: want an integer >= 0 (0: none)", i.key, v)
			}
			return l, fmt.Errorf("%s %q: want a positive integer", i.key, v)
		}
		if n == 0 {
			n = i.off
		}
		*i.dst = n
	}
	l.MaxEventStreams, l.MaxEventStreamsPerPrincipal, l.IdempotencyMaxKeys = int(streams), int(perStreams), int(idem)
	if v := getenv("MVQ_BODY_READ_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 24*time.Hour {
			return l, fmt.Errorf("MVQ_BODY_READ_TIMEOUT %q: want a duration such as 10s, at most 24h (0: none)", v)
		}
		if d == 0 {
			d = -1
		}
		l.BodyReadTimeout = d
	}
	return l, nil
}

// eventStreams is the cap on job event streams open at once.
func (l HTTPLimits) eventStreams() int {
	if l.MaxEventStreams > 0 {
		return l.MaxEventStreams
	}
	return httpapi.DefaultMaxEventStreams
}

// apply sets the limits of the API's configuration.
func (l HTTPLimits) apply(c *httpapi.Config) {
	c.MaxJSONBodyBytes = l.MaxJSONBodyBytes
	c.BodyReadTimeout, c.BodyMinBytesPerSecond = l.BodyReadTimeout, l.BodyMinBytesPerSecond
	c.SpoolBudgetBytes, c.SpoolPrincipalBytes = l.SpoolBudgetBytes, l.SpoolPrincipalBytes
}

// jobsOptions are the job client's options of the limits.
func (l HTTPLimits) jobsOptions() []jobs.ClientOption {
	return []jobs.ClientOption{jobs.IdempotencyMaxKeys(l.IdempotencyMaxKeys)}
}
