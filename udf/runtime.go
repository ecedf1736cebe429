package udf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// Kinds and protocols of runtimes.
const (
	KindExec = "exec"
	KindHTTP = "http"

	ProtocolNDJSON           = "ndjson"
	ProtocolArrow            = "arrow"
	ProtocolOpenAIEmbeddings = "openai-embeddings"
	ProtocolJSONBatch        = "json-batch"
)

// Defaults of a runtime's settings.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxBatchRows = 256
	DefaultMaxInFlight  = 4
	DefaultMaxRetries   = 4
	MaxMaxBatchRows     = 1 << 16
	MaxMaxInFlight      = 1024
	// MaxTimeout bounds a runtime's declared timeout.
	MaxTimeout = 24 * time.Hour
	// DefaultMaxOutputBytes bounds what one batch's answer may hold
	// (bytes read from a subprocess or an endpoint) unless the runtime
	// declares max_output_bytes; MaxMaxOutputBytes bounds that.
	DefaultMaxOutputBytes = 256 << 20
	MaxMaxOutputBytes     = 4 << 30
)

// Duration is a time.Duration written as "30s" in the file.
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("timeout: want a duration such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return fmt.Errorf("timeout: want a positive duration such as \"30s\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Runtime is one runtime the operator declared.
type Runtime struct {
	Name string `json:"-"`
	Kind string `json:"kind"`
	// exec: the command and its working directory (default: the folder
	// of the runtimes file).
	Command []string `json:"command,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	// http: the endpoint, and the environment variable of the worker
	// that holds its API key (sent as a bearer token).
	URL       string `json:"url,omitempty"`
	APIKeyEnv string `json:"api_key_env,omitempty"`

	Protocol     string   `json:"protocol"`
	Model        string   `json:"model,omitempty"`
	Dimensions   int      `json:"dimensions,omitempty"`
	Timeout      Duration `json:"timeout,omitempty"`
	MaxBatchRows int      `json:"max_batch_rows,omitempty"`
	MaxInFlight  int      `json:"max_in_flight,omitempty"`
	MaxRetries   int      `json:"max_retries,omitempty"`
	// MaxOutputBytes bounds the bytes of one batch's answer.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// AllowedEnv (exec) names the environment variables a manifest's
	// env_vars may set for this runtime's subprocesses; none when empty.
	// Names that change how programs load or run code are refused when
	// the file is read (see CheckEnvName).
	AllowedEnv []string `json:"allowed_env,omitempty"`
	// Models (http) lists the models a manifest's mvq.model may choose
	// besides Model.
	Models []string `json:"models,omitempty"`
}

// Settings are the settings of one use of a runtime: the runtime's, with
// a manifest's overrides, and the environment its subprocesses get.
type Settings struct {
	Runtime
	Env map[string]string
	// declaredInFlight is the runtime's own max_in_flight (Resolve sets
	// it): the in-flight bound per process, whatever a manifest lowered
	// for its calls.
	declaredInFlight int
}

func (r Runtime) withDefaults() Runtime {
	if r.Timeout <= 0 {
		r.Timeout = Duration(DefaultTimeout)
	}
	if r.MaxBatchRows <= 0 {
		r.MaxBatchRows = DefaultMaxBatchRows
	}
	if r.MaxInFlight <= 0 {
		r.MaxInFlight = DefaultMaxInFlight
	}
	if r.MaxRetries <= 0 {
		r.MaxRetries = DefaultMaxRetries
	}
	if r.MaxOutputBytes <= 0 {
		r.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return r
}

// check validates a runtime's declaration.
func (r Runtime) check() error {
	switch r.Kind {
	case KindExec:
		if len(r.Command) == 0 || r.Command[0] == "" {
			return fmt.Errorf("command: required for kind exec")
		}
		if r.URL != "" {
			return fmt.Errorf("url: only for kind http")
		}
		if r.Protocol != ProtocolNDJSON && r.Protocol != ProtocolArrow {
			return fmt.Errorf("protocol: %q (want ndjson or arrow for kind exec)", r.Protocol)
		}
	case KindHTTP:
		if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
			return fmt.Errorf("url: %q is not an http(s) URL", r.URL)
		}
		if len(r.Command) > 0 {
			return fmt.Errorf("command: only for kind exec")
		}
		switch r.Protocol {
		case ProtocolOpenAIEmbeddings, ProtocolJSONBatch, ProtocolArrow:
		default:
			return fmt.Errorf("protocol: %q (want openai-embeddings, json-batch or arrow for kind http)", r.Protocol)
		}
	default:
		return fmt.Errorf("kind: %q (want exec or http)", r.Kind)
	}
	if r.Protocol == ProtocolOpenAIEmbeddings && r.Dimensions <= 0 {
		return fmt.Errorf("dimensions: required (> 0) for protocol openai-embeddings")
	}
	if len(r.AllowedEnv) > 0 && r.Kind != KindExec {
		return fmt.Errorf("allowed_env: only for kind exec (an http runtime gets no environment from manifests)")
	}
	if len(r.AllowedEnv) > MaxEnvVars {
		return fmt.Errorf("allowed_env: at most %d names", MaxEnvVars)
	}
	for _, n := range r.AllowedEnv {
		if err := CheckEnvName(n); err != nil {
			return fmt.Errorf("allowed_env: %v", err)
		}
	}
	if len(r.Models) > 0 && r.Kind != KindHTTP {
		return fmt.Errorf("models: only for kind http")
	}
	for _, n := range r.Models {
		if strings.TrimSpace(n) == "" || len(n) > 256 {
			return fmt.Errorf("models: %q is not a model name", n)
		}
	}
	if r.Timeout > Duration(MaxTimeout) {
		return fmt.Errorf("timeout: at most %s", MaxTimeout)
	}
	if r.MaxOutputBytes < 0 || r.MaxOutputBytes > MaxMaxOutputBytes {
		return fmt.Errorf("max_output_bytes: must be 1 to %d", int64(MaxMaxOutputBytes))
	}
	return r.checkNumbers()
}

func (r Runtime) checkNumbers() error {
	switch {
	case r.Dimensions < 0 || r.Dimensions > 1<<16:
		return fmt.Errorf("dimensions: must be 1 to %d", 1<<16)
	case r.MaxBatchRows < 0 || r.MaxBatchRows > MaxMaxBatchRows:
		return fmt.Errorf("max_batch_rows: must be 1 to %d", MaxMaxBatchRows)
	case r.MaxInFlight < 0 || r.MaxInFlight > MaxMaxInFlight:
		return fmt.Errorf("max_in_flight: must be 1 to %d", MaxMaxInFlight)
	case r.MaxRetries < 0 || r.MaxRetries > 100:
		return fmt.Errorf("max_retries: must be 0 to 100")
	}
	return nil
}

// Registry holds the declared runtimes. The zero Registry (and nil) has
// none.
type Registry struct {
	runtimes map[string]Runtime
}

// Load reads a runtimes file (YAML or JSON): {"runtimes": {name: {...}}}.
// Unknown fields, bad kinds or protocols and missing commands or URLs are
// errors naming the runtime and field.
func Load(path string) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("runtimes file: %w", err)
	}
	dir, _ := filepath.Abs(filepath.Dir(path))
	return Parse(data, dir)
}

// Parse is Load over the file's bytes; dir is the default working
// directory of exec runtimes.
func Parse(data []byte, dir string) (*Registry, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("runtimes file: %v", err)
	}
	var doc struct {
		Runtimes map[string]json.RawMessage `json:"runtimes"`
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("runtimes file: %v", err)
	}
	reg := &Registry{runtimes: map[string]Runtime{}}
	for name, raw := range doc.Runtimes {
		if name == "" || strings.ContainsAny(name, " \t\n/\\\"") {
			return nil, fmt.Errorf("runtimes file: runtime name %q: no spaces, slashes or quotes", name)
		}
		var r Runtime
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("runtimes file: runtime %s: %v", name, err)
		}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("runtimes file: runtime %s: %v", name, err)
		}
		if r.Kind == KindExec && r.Dir == "" {
			r.Dir = dir
		}
		r.Name = name
		reg.runtimes[name] = r.withDefaults()
	}
	return reg, nil
}

// Lookup returns the runtime declared under name.
func (g *Registry) Lookup(name string) (Runtime, bool) {
	if g == nil {
		return Runtime{}, false
	}
	r, ok := g.runtimes[name]
	return r, ok
}

// Names lists the declared runtimes, sorted.
func (g *Registry) Names() []string {
	if g == nil {
		return nil
	}
	out := make([]string, 0, len(g.runtimes))
	for n := range g.runtimes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Overrides are what a manifest may change of a runtime's settings
// (nil: keep). A manifest may only lower the runtime's timeout,
// max_batch_rows, max_in_flight and dimensions, and choose its model only
// among those the runtime declares (model and models): the operator's
// runtimes file bounds what a client can ask of the workers.
type Overrides struct {
	Timeout      *Duration `json:"timeout,omitempty"`
	MaxBatchRows *int      `json:"max_batch_rows,omitempty"`
	MaxInFlight  *int      `json:"max_in_flight,omitempty"`
	Model        *string   `json:"model,omitempty"`
	Dimensions   *int      `json:"dimensions,omitempty"`
}

// FieldError is a refused manifest setting; Field is its path inside the
// manifest ("mvq.timeout", "env_vars.LD_PRELOAD").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Check validates o on its own: positive numbers within the absolute
// caps. Apply also bounds them by a runtime.
func (o Overrides) Check() error {
	switch {
	case o.Timeout != nil && (*o.Timeout <= 0 || *o.Timeout > Duration(MaxTimeout)):
		return fieldErr("mvq.timeout", "must be a positive duration of at most %s", MaxTimeout)
	case o.MaxBatchRows != nil && (*o.MaxBatchRows <= 0 || *o.MaxBatchRows > MaxMaxBatchRows):
		return fieldErr("mvq.max_batch_rows", "must be 1 to %d", MaxMaxBatchRows)
	case o.MaxInFlight != nil && (*o.MaxInFlight <= 0 || *o.MaxInFlight > MaxMaxInFlight):
		return fieldErr("mvq.max_in_flight", "must be 1 to %d", MaxMaxInFlight)
	case o.Dimensions != nil && (*o.Dimensions <= 0 || *o.Dimensions > 1<<16):
		return fieldErr("mvq.dimensions", "must be 1 to %d", 1<<16)
	case o.Model != nil && (strings.TrimSpace(*o.Model) == "" || len(*o.Model) > 256):
		return fieldErr("mvq.model", "not a model name")
	}
	return nil
}

// Apply returns r with o applied: each override at most what r declares
// (the model one r declares). Errors are *FieldError.
func (o Overrides) Apply(r Runtime) (Runtime, error) {
	if err := o.Check(); err != nil {
		return r, err
	}
	if o.Timeout != nil {
		if *o.Timeout > r.Timeout {
			return r, fieldErr("mvq.timeout", "%s is above the timeout of runtime %s (%s); a manifest may only lower it", time.Duration(*o.Timeout), r.Name, time.Duration(r.Timeout))
		}
		r.Timeout = *o.Timeout
	}
	if o.MaxBatchRows != nil {
		if *o.MaxBatchRows > r.MaxBatchRows {
			return r, fieldErr("mvq.max_batch_rows", "%d is above the max_batch_rows of runtime %s (%d); a manifest may only lower it", *o.MaxBatchRows, r.Name, r.MaxBatchRows)
		}
		r.MaxBatchRows = *o.MaxBatchRows
	}
	if o.MaxInFlight != nil {
		if *o.MaxInFlight > r.MaxInFlight {
			return r, fieldErr("mvq.max_in_flight", "%d is above the max_in_flight of runtime %s (%d); a manifest may only lower it", *o.MaxInFlight, r.Name, r.MaxInFlight)
		}
		r.MaxInFlight = *o.MaxInFlight
	}
	if o.Model != nil && *o.Model != r.Model {
		if !slices.Contains(r.Models, *o.Model) {
			return r, fieldErr("mvq.model", "%q is not a model of runtime %s (declared: %s)", *o.Model, r.Name, r.modelList())
		}
		r.Model = *o.Model
	}
	if o.Dimensions != nil {
		if r.Dimensions <= 0 {
			return r, fieldErr("mvq.dimensions", "runtime %s has no dimensions to lower", r.Name)
		}
		if *o.Dimensions > r.Dimensions {
			return r, fieldErr("mvq.dimensions", "%d is above the dimensions of runtime %s (%d); a manifest may only lower them", *o.Dimensions, r.Name, r.Dimensions)
		}
		// Only an embeddings endpoint is told the dimensions it should
		// answer; other code answers what it declared, and a lowered value
		// would only make every row fail the column's width.
		if *o.Dimensions != r.Dimensions && r.Protocol != ProtocolOpenAIEmbeddings {
			return r, fieldErr("mvq.dimensions", "runtime %s (protocol %s) answers %d dimensions; only protocol %s can be asked for fewer", r.Name, r.Protocol, r.Dimensions, ProtocolOpenAIEmbeddings)
		}
		r.Dimensions = *o.Dimensions
	}
	return r, nil
}

func (r Runtime) modelList() string {
	var all []string
	if r.Model != "" {
		all = append(all, strconv.Quote(r.Model))
	}
	for _, m := range r.Models {
		all = append(all, strconv.Quote(m))
	}
	if len(all) == 0 {
		return "none"
	}
	return strings.Join(all, ", ")
}

// Resolve is the settings of one use of r: o applied (nil: none) and
// env as the subprocesses' environment, every name one of r's
// allowed_env. Errors are *FieldError naming the manifest's field.
func (r Runtime) Resolve(o *Overrides, env map[string]string) (Settings, error) {
	s := Settings{Runtime: r, declaredInFlight: r.MaxInFlight}
	if o != nil {
		var err error
		if s.Runtime, err = o.Apply(r); err != nil {
			return Settings{}, err
		}
	}
	if err := r.CheckEnv(env); err != nil {
		return Settings{}, err
	}
	if len(env) > 0 {
		s.Env = maps.Clone(env)
	}
	return s, nil
}
