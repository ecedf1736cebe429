// Package deploy holds mvq's container and observability configuration
// (Dockerfile, docker-compose.yml, Prometheus, Grafana, Tempo and the
// OpenTelemetry Collector) and the metric contract they rely on.
//
// metrics.txt is the contract: one metric a line, "name label1,label2,...".
// Histograms are listed by their _bucket series (with le); their _sum and
// _count series carry the same labels minus le. Dashboards, alert rules and
// the Grafana datasource provisioning may query only those names and labels;
// deploy_test.go enforces it, and DashboardMetrics lets a test elsewhere
// compare what they query with what the binaries' /metrics expose.
//
// Aggregation conventions the queries follow (so exporters should match):
// mvq_queue_depth, mvq_queue_latency_seconds and mvq_workers_active are read
// from Redis and may be exported with the same value by several processes,
// so queries combine them with max by (cluster...); counters, histograms and
// mvq_workitems_running are per process and are summed. Label values the
// queries assume: mvq_refresh_jobs_total{state} uses the job states
// (PENDING, RUNNING, DONE, FAILED, CANCELLED); mvq_queue_depth{state} uses
// asynq task states (pending, active, scheduled, retry, archived, completed).
package deploy

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
)

// The files the queries come from, embedded so that DashboardMetrics works
// from any working directory.
//
//go:embed metrics.txt grafana/dashboards/*.json prometheus/alerts.yml grafana/provisioning/datasources/*.yml
var files embed.FS

// Query is one PromQL expression found in the deploy configuration.
type Query struct {
	Source string   // where it is: file and position, for error messages
	Expr   string   // the PromQL, Grafana variables ($cluster, $__rate_interval) included
	Refs   []string // labels its legend or alert templates reference ({{cluster}}, $labels.kind)
}

// Contract returns the metric contract in metrics.txt: metric name to the
// labels it carries.
func Contract() (map[string][]string, error) { return contractFS(files) }

// Queries returns every PromQL expression in the dashboards, the alert rules
// and the Grafana datasource provisioning.
func Queries() ([]Query, error) { return queriesFS(files) }

// DashboardMetrics returns every metric the dashboards, alert rules and
// Grafana datasource provisioning query, each with the sorted labels the
// queries use on it (selector matchers, by/without/on/ignoring/group_left/
// group_right lists and label_values arguments). Names are the series names
// as queried, so a histogram appears as name_bucket, name_sum or name_count,
// exactly as in the Prometheus text exposition.
func DashboardMetrics() (map[string][]string, error) {
	qs, err := Queries()
	if err != nil {
		return nil, err
	}
	return metricsOf(qs)
}

func metricsOf(qs []Query) (map[string][]string, error) {
	all := map[string]map[string]bool{}
	for _, q := range qs {
		m, err := ExprMetrics(q.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q.Source, err)
		}
		for name, labels := range m {
			if all[name] == nil {
				all[name] = map[string]bool{}
			}
			for _, l := range labels {
				all[name][l] = true
			}
		}
	}
	out := make(map[string][]string, len(all))
	for name, set := range all {
		out[name] = sortedKeys(set)
	}
	return out, nil
}

// SeriesLabels returns the labels contract allows on series name: the
// contract's own entry, or for name_sum and name_count of a histogram listed
// as name_bucket, the bucket's labels without le.
func SeriesLabels(contract map[string][]string, name string) ([]string, bool) {
	if labels, ok := contract[name]; ok {
		return labels, true
	}
	for _, suffix := range []string{"_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if labels, ok := contract[base+"_bucket"]; ok {
				var out []string
				for _, l := range labels {
					if l != "le" {
						out = append(out, l)
					}
				}
				return out, true
			}
		}
	}
	return nil, false
}

// CheckContract returns one error for each metric in used that contract
// does not list and each label used on a metric that contract does not
// list for it, in a stable order.
func CheckContract(used, contract map[string][]string) []error {
	var errs []error
	for _, name := range sortedKeys(used) {
		allowed, ok := SeriesLabels(contract, name)
		if !ok {
			errs = append(errs, fmt.Errorf("metric %s is not in metrics.txt", name))
			continue
		}
		for _, l := range used[name] {
			if !slices.Contains(allowed, l) {
				errs = append(errs, fmt.Errorf("metric %s: label %q is not in metrics.txt (allowed: %s)", name, l, strings.Join(allowed, ",")))
			}
		}
	}
	return errs
}

func contractFS(fsys fs.FS) (map[string][]string, error) {
	data, err := fs.ReadFile(fsys, "metrics.txt")
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) > 2 || !metricName.MatchString(f[0]) {
			return nil, fmt.Errorf("metrics.txt:%d: want `name label1,label2,...`, got %q", i+1, line)
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("metrics.txt:%d: %s listed twice", i+1, f[0])
		}
		labels := []string{}
		if len(f) == 2 {
			for _, l := range strings.Split(f[1], ",") {
				if !labelName.MatchString(l) {
					return nil, fmt.Errorf("metrics.txt:%d: bad label %q", i+1, l)
				}
				labels = append(labels, l)
			}
		}
		out[f[0]] = labels
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("metrics.txt lists no metrics")
	}
	return out, nil
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	legendRef  = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	alertRef   = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// queriesFS collects the PromQL of every dashboard, the alert rules and the
// datasource provisioning in fsys (rooted at deploy/).
func queriesFS(fsys fs.FS) ([]Query, error) {
	var qs []Query
	dashboards, err := fs.Glob(fsys, "grafana/dashboards/*.json")
	if err != nil {
		return nil, err
	}
	if len(dashboards) == 0 {
		return nil, fmt.Errorf("no dashboards in grafana/dashboards")
	}
	for _, p := range dashboards {
		q, err := dashboardQueries(fsys, p)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q...)
	}
	q, err := alertQueries(fsys, "prometheus/alerts.yml")
	if err != nil {
		return nil, err
	}
	qs = append(qs, q...)
	sources, err := fs.Glob(fsys, "grafana/provisioning/datasources/*.yml")
	if err != nil {
		return nil, err
	}
	for _, p := range sources {
		q, err := datasourceQueries(fsys, p)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q...)
	}
	return qs, nil
}

// dashboardQueries walks a dashboard's JSON: every object with a string
// "expr" (panel targets, annotations) is PromQL, and so is the query of
// every templating variable on a Prometheus datasource.
func dashboardQueries(fsys fs.FS, p string) ([]Query, error) {
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	var qs []Query
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			if expr, ok := v["expr"].(string); ok && strings.TrimSpace(expr) != "" {
				src := where
				if ref, ok := v["refId"].(string); ok {
					src += " target " + ref
				}
				var refs []string
				if legend, ok := v["legendFormat"].(string); ok {
					refs = submatches(legendRef, legend)
				}
				qs = append(qs, Query{Source: p + ": " + src, Expr: expr, Refs: refs})
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(v[k], where+"."+k)
			}
		case []any:
			for i, e := range v {
				w := fmt.Sprintf("%s[%d]", where, i)
				if m, ok := e.(map[string]any); ok {
					if t, ok := m["title"].(string); ok && t != "" {
						w += fmt.Sprintf("(%q)", t)
					} else if n, ok := m["name"].(string); ok && n != "" {
						w += fmt.Sprintf("(%q)", n)
					}
				}
				walk(e, w)
			}
		}
	}
	walk(doc, "")
	// Templating variables on Prometheus: query is a string or {query: ...}.
	if d, ok := doc.(map[string]any); ok {
		if t, ok := d["templating"].(map[string]any); ok {
			list, _ := t["list"].([]any)
			for _, e := range list {
				v, _ := e.(map[string]any)
				if v == nil || v["type"] != "query" || datasourceType(v["datasource"]) != "prometheus" {
					continue
				}
				expr, _ := v["query"].(string)
				if m, ok := v["query"].(map[string]any); ok {
					expr, _ = m["query"].(string)
				}
				if strings.TrimSpace(expr) != "" {
					qs = append(qs, Query{Source: fmt.Sprintf("%s: variable %v", p, v["name"]), Expr: expr})
				}
			}
		}
	}
	return qs, nil
}

func datasourceType(v any) string {
	switch d := v.(type) {
	case map[string]any:
		if t, ok := d["type"].(string); ok {
			return t
		}
		if u, ok := d["uid"].(string); ok {
			return u // the provisioned uids are the type names
		}
	case string:
		return d
	}
	return ""
}

func alertQueries(fsys fs.FS, p string) ([]Query, error) {
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	var qs []Query
	for _, g := range doc.Groups {
		for i, r := range g.Rules {
			name := r.Alert + r.Record
			var refs []string
			for _, m := range []map[string]string{r.Labels, r.Annotations} {
				for _, k := range sortedKeys(m) {
					refs = append(refs, submatches(alertRef, m[k])...)
				}
			}
			qs = append(qs, Query{Source: fmt.Sprintf("%s: group %s rule %d (%s)", p, g.Name, i, name), Expr: r.Expr, Refs: refs})
		}
	}
	return qs, nil
}

// datasourceQueries returns the tracesToMetrics queries of provisioned
// Tempo datasources (they run against Prometheus).
func datasourceQueries(fsys fs.FS, p string) ([]Query, error) {
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Datasources []struct {
			Name     string `yaml:"name"`
			JSONData struct {
				TracesToMetrics struct {
					Queries []struct {
						Name  string `yaml:"name"`
						Query string `yaml:"query"`
					} `yaml:"queries"`
				} `yaml:"tracesToMetrics"`
			} `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	var qs []Query
	for _, ds := range doc.Datasources {
		for _, q := range ds.JSONData.TracesToMetrics.Queries {
			// Grafana expands $VAR in provisioning files and $$ is a literal $.
			expr := strings.ReplaceAll(q.Query, "$$", "$")
			qs = append(qs, Query{Source: fmt.Sprintf("%s: datasource %s tracesToMetrics %q", p, ds.Name, q.Name), Expr: expr})
		}
	}
	return qs, nil
}

// ---- PromQL ----------------------------------------------------------------

type tokKind int

const (
	tIdent tokKind = iota
	tString
	tNumber
	tVar // a Grafana variable: $name, ${name...}
	tPunct
)

type token struct {
	kind tokKind
	text string // for strings, the unquoted value
}

var (
	aggregators = set("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
		"bottomk", "topk", "quantile", "limitk", "limit_ratio")
	keywords = set("and", "or", "unless", "bool", "offset", "atan2", "inf", "nan")
	grouping = set("by", "without", "on", "ignoring", "group_left", "group_right")
)

// ExprMetrics parses a PromQL expression (Grafana variables such as
// $cluster, ${trace_id} and $__rate_interval allowed) and returns each
// metric it selects with the sorted labels the expression uses on it: the
// label names of its selector's matchers, the by/without lists of
// aggregations around it, the on/ignoring/group_left/group_right lists of
// the vector matching it takes part in, and for Grafana's
// label_values(metric, label) the label. __name__ is not reported.
func ExprMetrics(expr string) (map[string][]string, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	// Matching brackets.
	match := make([]int, len(toks))
	var stack []int
	for i, t := range toks {
		match[i] = -1
		if t.kind != tPunct {
			continue
		}
		switch t.text {
		case "(", "{":
			stack = append(stack, i)
		case ")", "}":
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced %q", t.text)
			}
			o := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if want := map[string]string{"(": ")", "{": "}"}[toks[o].text]; want != t.text {
				return nil, fmt.Errorf("%q closed by %q", toks[o].text, t.text)
			}
			match[o], match[i] = i, o
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("unclosed %q", toks[stack[len(stack)-1]].text)
	}
	is := func(i int, text string) bool {
		return i >= 0 && i < len(toks) && toks[i].kind == tPunct && toks[i].text == text
	}
	// enclosing returns the innermost parenthesised span around i.
	enclosing := func(i int) (int, int) {
		for o := i - 1; o >= 0; o-- {
			if is(o, "(") && match[o] > i {
				return o, match[o]
			}
		}
		return -1, len(toks) // the whole expression
	}

	type metric struct {
		at     int
		name   string
		labels []string
	}
	type scoped struct {
		from, to int
		labels   []string
	}
	var metrics []metric
	var scopes []scoped
	consumed := make([]bool, len(toks))

	// matchers parses {...} at open and returns its label names and the
	// __name__ (or quoted) metric name if any.
	matchers := func(open int) (labels []string, name string, err error) {
		closeAt := match[open]
		for j := open + 1; j < closeAt; j++ {
			consumed[j] = true
			t := toks[j]
			if t.kind == tPunct && t.text == "," {
				continue
			}
			if t.kind != tIdent && t.kind != tString {
				return nil, "", fmt.Errorf("unexpected %q in selector", t.text)
			}
			if j+1 < closeAt && toks[j+1].kind == tPunct && isMatchOp(toks[j+1].text) {
				if j+2 >= closeAt || (toks[j+2].kind != tString && toks[j+2].kind != tVar) {
					return nil, "", fmt.Errorf("matcher on %s wants a string", t.text)
				}
				if t.text == "__name__" {
					if toks[j+1].text != "=" || toks[j+2].kind != tString {
						return nil, "", fmt.Errorf("only __name__=\"literal\" is supported")
					}
					name = toks[j+2].text
				} else {
					labels = append(labels, t.text)
				}
				consumed[j+1], consumed[j+2] = true, true
				j += 2
				continue
			}
			if t.kind == tString { // Prometheus 3 {"metric.name", ...}
				name = t.text
				continue
			}
			return nil, "", fmt.Errorf("label %s without a matcher", t.text)
		}
		consumed[open], consumed[closeAt] = true, true
		return labels, name, nil
	}

	for i := 0; i < len(toks); i++ {
		if consumed[i] {
			continue
		}
		t := toks[i]
		switch {
		case t.kind == tIdent && grouping[strings.ToLower(t.text)]:
			kw := strings.ToLower(t.text)
			if !is(i+1, "(") {
				if kw == "group_left" || kw == "group_right" {
					continue // no extra labels
				}
				return nil, fmt.Errorf("%s without a label list", t.text)
			}
			open, closeAt := i+1, match[i+1]
			var labels []string
			for j := open + 1; j < closeAt; j++ {
				consumed[j] = true
				switch {
				case toks[j].kind == tIdent || toks[j].kind == tString:
					labels = append(labels, toks[j].text)
				case is(j, ","):
				default:
					return nil, fmt.Errorf("unexpected %q in %s list", toks[j].text, t.text)
				}
			}
			consumed[open], consumed[closeAt] = true, true
			var from, to int
			switch {
			case kw == "on" || kw == "ignoring" || kw == "group_left" || kw == "group_right":
				from, to = enclosing(i)
			case i > 0 && toks[i-1].kind == tIdent && aggregators[strings.ToLower(toks[i-1].text)]:
				// sum by (l) (expr)
				if !is(closeAt+1, "(") {
					return nil, fmt.Errorf("%s %s (...) without an argument", toks[i-1].text, t.text)
				}
				from, to = closeAt+1, match[closeAt+1]
			case is(i-1, ")"):
				// sum (expr) by (l)
				from, to = match[i-1], i-1
			default:
				return nil, fmt.Errorf("%s not after an aggregation", t.text)
			}
			scopes = append(scopes, scoped{from, to, labels})
			i = closeAt
		case t.kind == tIdent && t.text == "label_values" && is(i+1, "("):
			open, closeAt := i+1, match[i+1]
			comma := -1
			for j := open + 1; j < closeAt; j++ {
				if is(j, "(") || is(j, "{") {
					j = match[j]
					continue
				}
				if is(j, ",") {
					comma = j
				}
			}
			if comma < 0 || comma+2 != closeAt || toks[comma+1].kind != tIdent {
				return nil, fmt.Errorf("label_values wants (metric, label)")
			}
			consumed[comma+1] = true
			scopes = append(scopes, scoped{open, comma, []string{toks[comma+1].text}})
		case t.kind == tIdent && is(i+1, "("):
			// a function or an aggregation: its arguments follow
		case t.kind == tIdent && (aggregators[strings.ToLower(t.text)] || keywords[strings.ToLower(t.text)]):
		case t.kind == tIdent:
			m := metric{at: i, name: t.text}
			if is(i+1, "{") {
				labels, name, err := matchers(i + 1)
				if err != nil {
					return nil, err
				}
				if name != "" {
					return nil, fmt.Errorf("metric %s also named %s in its selector", t.text, name)
				}
				m.labels = labels
			}
			metrics = append(metrics, m)
		case is(i, "{"):
			labels, name, err := matchers(i)
			if err != nil {
				return nil, err
			}
			if name == "" {
				return nil, fmt.Errorf("selector without a metric name")
			}
			metrics = append(metrics, metric{at: i, name: name, labels: labels})
		}
	}

	out := map[string]map[string]bool{}
	for _, m := range metrics {
		if !metricName.MatchString(m.name) {
			return nil, fmt.Errorf("bad metric name %q", m.name)
		}
		if out[m.name] == nil {
			out[m.name] = map[string]bool{}
		}
		for _, l := range m.labels {
			out[m.name][l] = true
		}
		for _, s := range scopes {
			if m.at > s.from && m.at < s.to {
				for _, l := range s.labels {
					out[m.name][l] = true
				}
			}
		}
	}
	res := make(map[string][]string, len(out))
	for name, labels := range out {
		for l := range labels {
			if !labelName.MatchString(l) {
				return nil, fmt.Errorf("metric %s: bad label name %q", name, l)
			}
		}
		res[name] = sortedKeys(labels)
	}
	return res, nil
}

func isMatchOp(s string) bool { return s == "=" || s == "!=" || s == "=~" || s == "!~" }

// lex splits a PromQL expression into tokens, dropping comments and range
// or subquery brackets ([5m], [$__rate_interval], [1h:5m]).
func lex(s string) ([]token, error) {
	var toks []token
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && c != '`' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, token{tString, b.String()})
			i = j + 1
		case c == '[':
			depth := 0
			j := i
			for ; j < len(s); j++ {
				if s[j] == '[' {
					depth++
				} else if s[j] == ']' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unclosed [ at %d", i)
			}
			i = j + 1
		case c == '$':
			j := i + 1
			if j < len(s) && s[j] == '{' {
				for j < len(s) && s[j] != '}' {
					j++
				}
				if j >= len(s) {
					return nil, fmt.Errorf("unclosed ${ at %d", i)
				}
				j++
			} else {
				for j < len(s) && isIdent(s[j]) {
					j++
				}
				if j == i+1 {
					return nil, fmt.Errorf("lone $ at %d", i)
				}
			}
			toks = append(toks, token{tVar, s[i:j]})
			i = j
		case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]):
			j := i
			for j < len(s) && (isIdent(s[j]) || s[j] == '.' ||
				(s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E') && !strings.ContainsAny(s[i:j], "xX")) {
				j++
			}
			toks = append(toks, token{tNumber, s[i:j]})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			toks = append(toks, token{tIdent, s[i:j]})
			i = j
		default:
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch two {
			case "=~", "!~", "!=", "==", ">=", "<=":
				toks = append(toks, token{tPunct, two})
				i += 2
				continue
			}
			if !strings.ContainsRune("(){},=<>+-*/%^@", rune(c)) {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			toks = append(toks, token{tPunct, string(c)})
			i++
		}
	}
	return toks, nil
}

// ---- helpers -----------------------------------------------------------------

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func submatches(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}
