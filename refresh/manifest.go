package refresh

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mvq-dev/mvq/udf"
)

// Manifest is the environment of a view's or column's user code: the
// GenevaManifest fields and an mvq section. It is kept as the JSON text
// the client sent; its checksum is the hex SHA-256 of its canonical JSON
// (keys sorted, no spaces).
type Manifest struct {
	Name             string            `json:"name,omitempty"`
	Version          string            `json:"version,omitempty"`
	Pip              []string          `json:"pip,omitempty"`
	PyModules        []string          `json:"py_modules,omitempty"`
	HeadImage        string            `json:"head_image,omitempty"`
	WorkerImage      string            `json:"worker_image,omitempty"`
	SkipSitePackages *bool             `json:"skip_site_packages,omitempty"`
	EnvVars          map[string]string `json:"env_vars,omitempty"`
	MVQ              *ManifestMVQ      `json:"mvq,omitempty"`
}

// ManifestMVQ is the manifest's mvq section: the runtime to use and
// overrides of its settings.
type ManifestMVQ struct {
	Runtime string `json:"runtime,omitempty"`
	udf.Overrides
}

// NotHonoured lists the fields this deployment records but cannot act on
// (packages and images: the operator's runtimes fix the environment).
func (m *Manifest) NotHonoured() []string {
	var out []string
	if len(m.Pip) > 0 {
		out = append(out, "pip")
	}
	if len(m.PyModules) > 0 {
		out = append(out, "py_modules")
	}
	if m.HeadImage != "" {
		out = append(out, "head_image")
	}
	if m.WorkerImage != "" {
		out = append(out, "worker_image")
	}
	if m.SkipSitePackages != nil {
		out = append(out, "skip_site_packages")
	}
	return out
}

// runtime is the runtime the manifest names ("" when none).
func (m *Manifest) runtime() string {
	if m == nil || m.MVQ == nil {
		return ""
	}
	return m.MVQ.Runtime
}

// ParseManifest decodes a manifest strictly: a JSON object without
// duplicate keys, unknown fields or wrong types. Errors name the field
// ("mvq.timeout: ..."), without the "manifest: " prefix the caller adds.
func ParseManifest(s string) (*Manifest, error) {
	if err := checkManifest(s); err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%s: must be %s, not a JSON %s", te.Field, te.Type, te.Value)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, fmt.Errorf("unknown field %s (want name, version, pip, py_modules, head_image, worker_image, skip_site_packages, env_vars, mvq)", f)
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if strings.HasPrefix(msg, "timeout: ") { // the only field with its own decoder
			msg = "mvq." + msg
		}
		return nil, fmt.Errorf("%s", msg)
	}
	// Names that are never safe, and bounds, whatever runtime runs it;
	// which names a runtime allows is resolveRuntime's to check.
	if err := udf.CheckEnvVars(m.EnvVars); err != nil {
		return nil, err
	}
	if m.MVQ != nil {
		if err := m.MVQ.Overrides.Check(); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

// manifestErr is err of the manifest at field as a CodeInvalidInput
// naming it: "manifest.env_vars.LD_PRELOAD: ..." for a refused setting,
// "manifest: ..." otherwise.
func manifestErr(field string, err error) error {
	var fe *udf.FieldError
	if errors.As(err, &fe) {
		return invalid("%s.%s: %s", field, fe.Field, fe.Msg)
	}
	return invalid("%s: %v", field, err)
}

// resolveRuntime is the settings runtime name runs with under manifest m
// (nil: none): the manifest's mvq.runtime instead when it names one, its
// overrides within the runtime's bounds and its env_vars among the names
// the runtime allows. field is where the manifest came from, for errors.
func (e *Engine) resolveRuntime(field string, m *Manifest, name string) (udf.Settings, error) {
	if rt := m.runtime(); rt != "" {
		name = rt
	}
	rt, ok := e.opts.Runtimes.Lookup(name)
	if !ok {
		return udf.Settings{}, invalid("runtime %q is not a runtime of this deployment (declared: %s)", name, runtimeList(e.opts.Runtimes))
	}
	var o *udf.Overrides
	var env map[string]string
	if m != nil {
		if m.MVQ != nil {
			o = &m.MVQ.Overrides
		}
		env = m.EnvVars
	}
	s, err := rt.Resolve(o, env)
	if err != nil {
		return udf.Settings{}, manifestErr(field, err)
	}
	return s, nil
}

// ManifestChecksum is the hex SHA-256 of the canonical JSON of manifest s
// (keys sorted at every level, no insignificant spaces, numbers as
// written); "" for "". s must be valid JSON.
func ManifestChecksum(s string) string {
	if s == "" {
		return ""
	}
	c, err := canonicalJSON(s)
	if err != nil {
		return sha256Hex(s)
	}
	return sha256Hex(c)
}

func canonicalJSON(s string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// checkManifestText validates manifest s against the engine's runtimes
// and, when given, its checksum; field prefixes errors.
func (e *Engine) checkManifestText(field, s, checksum string) (*Manifest, error) {
	m, err := ParseManifest(s)
	if err != nil {
		return nil, manifestErr(field, err)
	}
	if rt := m.runtime(); rt != "" {
		if _, ok := e.opts.Runtimes.Lookup(rt); !ok {
			return nil, invalid("%s: mvq.runtime %q is not a runtime of this deployment (declared: %s)", field, rt, runtimeList(e.opts.Runtimes))
		}
	}
	if checksum != "" && !strings.EqualFold(checksum, ManifestChecksum(s)) {
		return nil, invalid("%s_checksum: %q is not the SHA-256 of the manifest's canonical JSON (%s)", field, checksum, ManifestChecksum(s))
	}
	return m, nil
}

func runtimeList(r *udf.Registry) string {
	if n := r.Names(); len(n) > 0 {
		return strings.Join(n, ", ")
	}
	return "none; the operator declares them in MVQ_RUNTIMES_FILE"
}

// settingsInForce resolves runtime name for one job under the manifest in
// force: the job's inline one (jobText, field "manifest") when given,
// else its owner's stored one (ownText from ownField: a view's
// udtf_spec.manifest, a column's virtual_column.manifest), which may name
// another runtime and lower its settings (see resolveRuntime). It runs
// when the job is accepted and again when it runs.
func (e *Engine) settingsInForce(jobText, ownText, ownField, name string) (udf.Settings, error) {
	text, field := jobText, "manifest"
	if text == "" {
		text, field = ownText, ownField
	}
	return e.settingsFrom(field, text, name)
}

// settingsFrom is the runtime name resolved under manifest text ("" for
// none) from field.
func (e *Engine) settingsFrom(field, text, name string) (udf.Settings, error) {
	var m *Manifest
	if text != "" {
		var err error
		if m, err = ParseManifest(text); err != nil {
			return udf.Settings{}, manifestErr(field, err)
		}
	}
	return e.resolveRuntime(field, m, name)
}
