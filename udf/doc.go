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
//     events (capped). The environment is PATH, HOME and LANG plus the
//     manifest's env_vars the runtime's allowed_env lists, nothing else
//     (env.go: names that change which code runs are never allowed). A
//     crash, a timeout, output past max_output_bytes or output that does
//     not parse (Arrow IPC is verified before use) fails the call with a
//     message naming the runtime and the first bad line, and the process
//     is replaced. Idle processes and pools are closed after IdleTimeout;
//     at most MaxPools pools (environments) per runtime are kept.
//   - http: protocol openai-embeddings (POST {model, input, dimensions}
//     → data[i].embedding), json-batch ({"rows": [...]} both ways) or
//     arrow (Arrow IPC both ways). Retries with backoff on 429, 5xx and
//     connection errors, honouring Retry-After; at most max_in_flight
//     requests per process and runtime; the API key comes from the
//     environment variable api_key_env names.
//
// HashEmbed (hashembed.go) is a built-in embedder for trying the
// pipeline without a model: feature hashing of words and character
// trigrams, L2-normalised, not learned. `mvq udf hash-embed` serves it
// over the ndjson protocol, and mvq dev declares it as the exec runtime
// local-embed (LocalEmbedRuntime, Registry.With) unless the runtimes file
// declares that name.
//
// A manifest may only lower a runtime's settings and pick a declared
// model (Runtime.Resolve). Errors caused by the user's code or endpoint
// are *Error with Permanent set when a retry cannot help (bad output, a
// crash, a non-retryable status) and Timeout set when it was a timeout,
// so callers can classify them.
package udf
