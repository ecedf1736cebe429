package udf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
}

// Settings are the settings of one use of a runtime: the runtime's, with
// a manifest's overrides, and the environment its subprocesses get.
type Settings struct {
	Runtime
	Env map[string]string
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
// (nil/zero: keep).
type Overrides struct {
	Timeout      *Duration `json:"timeout,omitempty"`
	MaxBatchRows *int      `json:"max_batch_rows,omitempty"`
	MaxInFlight  *int      `json:"max_in_flight,omitempty"`
	Model        *string   `json:"model,omitempty"`
	Dimensions   *int      `json:"dimensions,omitempty"`
}

// Apply returns r with o applied, checked.
func (o Overrides) Apply(r Runtime) (Runtime, error) {
	if o.Timeout != nil {
		r.Timeout = *o.Timeout
	}
	if o.MaxBatchRows != nil {
		if *o.MaxBatchRows <= 0 {
			return r, fmt.Errorf("max_batch_rows: must be > 0")
		}
		r.MaxBatchRows = *o.MaxBatchRows
	}
	if o.MaxInFlight != nil {
		if *o.MaxInFlight <= 0 {
			return r, fmt.Errorf("max_in_flight: must be > 0")
		}
		r.MaxInFlight = *o.MaxInFlight
	}
	if o.Model != nil {
		r.Model = *o.Model
	}
	if o.Dimensions != nil {
		if *o.Dimensions <= 0 {
			return r, fmt.Errorf("dimensions: must be > 0")
		}
		r.Dimensions = *o.Dimensions
	}
	return r, r.checkNumbers()
}
