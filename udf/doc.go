// Package udf runs user code for the refresh engine through runtimes an
// operator declares in a file (MVQ_RUNTIMES_FILE); clients only name
// them. Two kinds exist:
//
//   - exec: long-lived subprocesses, pooled per runtime and environment,
//     fed batches over stdin/stdout. Protocol ndjson: one JSON object per
//     input row ({"__row": n, <input columns>}), then {"__end": true};
//     the process answers one line per output row ({"__row": n,
//     <outputs>} for a row-wise function; zero or more lines per input
//     row for a table function) and {"__end": true}. Protocol arrow: one
//     Arrow IPC stream each way per batch. stderr lines go to the job's
//     events (capped). The environment is the manifest's env_vars plus
//     PATH, HOME and LANG, nothing else. A crash, a timeout or output that
//     does not parse fails the call with a message naming the runtime and
//     the first bad line, and the process is replaced.
//   - http: protocol openai-embeddings (POST {model, input, dimensions}
//     → data[i].embedding), json-batch ({"rows": [...]} both ways) or
//     arrow (Arrow IPC both ways). Retries with backoff on 429, 5xx and
//     connection errors, honouring Retry-After; at most max_in_flight
//     requests per process and runtime; the API key comes from the
//     environment variable api_key_env names.
//
// Errors caused by the user's code or endpoint are *Error with
// Permanent set when a retry cannot help (bad output, a crash, a
// non-retryable status), so callers can classify them.
package udf
