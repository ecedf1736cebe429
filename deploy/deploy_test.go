package deploy

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/mvq-dev/mvq/auth"
)

// The tests run in deploy/, so paths are relative to it, as in the compose
// file.

func readYAML(t *testing.T, p string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if doc == nil {
		t.Fatalf("%s: empty", p)
	}
	return doc
}

func readJSON(t *testing.T, p string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return doc
}

// get walks maps by key: get(doc, "a", "b") is doc["a"]["b"], or nil.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// strs turns a YAML string or list (compose command, names) into strings.
func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, str(e))
		}
		return out
	}
	return nil
}

func exists(t *testing.T, p, what string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Errorf("%s: %s does not exist (relative to deploy/): %v", what, p, err)
		return nil
	}
	return fi
}

func port(t *testing.T, hostport, what string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Errorf("%s: %q: %v", what, hostport, err)
	}
	return p
}

// ---- docker-compose.yml ------------------------------------------------------

type compose struct {
	doc      map[string]any
	services map[string]any
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	doc := readYAML(t, "docker-compose.yml")
	services, _ := doc["services"].(map[string]any)
	if len(services) == 0 {
		t.Fatal("docker-compose.yml: no services")
	}
	return compose{doc, services}
}

func (c compose) service(t *testing.T, name string) map[string]any {
	t.Helper()
	s, ok := c.services[name].(map[string]any)
	if !ok {
		t.Fatalf("docker-compose.yml: no service %q", name)
	}
	return s
}

// env returns a service's environment (map or list form).
func env(s map[string]any) map[string]string {
	out := map[string]string{}
	switch e := s["environment"].(type) {
	case map[string]any:
		for k, v := range e {
			out[k] = str(v)
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(str(kv), "=")
			out[k] = v
		}
	}
	return out
}

type mount struct {
	bind           bool
	source, target string
}

func mounts(t *testing.T, svc string, s map[string]any) []mount {
	t.Helper()
	var out []mount
	for _, v := range list(s["volumes"]) {
		switch v := v.(type) {
		case string:
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("service %s: volume %q has no target", svc, v)
				continue
			}
			src := parts[0]
			bind := strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") || strings.HasPrefix(src, "~")
			out = append(out, mount{bind, src, parts[1]})
		case map[string]any:
			out = append(out, mount{str(v["type"]) == "bind", str(v["source"]), str(v["target"])})
		}
	}
	return out
}

// resolve maps a path inside a service's container to the host path (relative
// to deploy/) of the bind mount that provides it.
func (c compose) resolve(t *testing.T, svc, containerPath string) (string, bool) {
	t.Helper()
	var best mount
	for _, m := range mounts(t, svc, c.service(t, svc)) {
		if m.bind && (containerPath == m.target || strings.HasPrefix(containerPath, strings.TrimSuffix(m.target, "/")+"/")) &&
			len(m.target) > len(best.target) {
			best = m
		}
	}
	if best.target == "" {
		return "", false
	}
	return filepath.Join(best.source, strings.TrimPrefix(containerPath, best.target)), true
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func TestComposeFile(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"redis", "seaweedfs", "seaweedfs-init", "api", "worker-default", "worker-gpu", "otel-collector", "tempo", "prometheus", "grafana"} {
		c.service(t, name)
	}
	declared, _ := c.doc["volumes"].(map[string]any)

	t.Run("referenced files exist", func(t *testing.T) {
		for name, v := range c.services {
			s := v.(map[string]any)
			if b := s["build"]; b != nil {
				ctx, dockerfile := str(b), "Dockerfile"
				if m, ok := b.(map[string]any); ok {
					ctx = str(m["context"])
					if d := str(m["dockerfile"]); d != "" {
						dockerfile = d
					}
				}
				if fi := exists(t, ctx, "service "+name+" build context"); fi != nil && !fi.IsDir() {
					t.Errorf("service %s: build context %s is not a directory", name, ctx)
				}
				exists(t, filepath.Join(ctx, dockerfile), "service "+name+" dockerfile")
			}
			for _, m := range mounts(t, name, s) {
				switch {
				case m.bind && filepath.IsAbs(m.source):
					t.Errorf("service %s: bind mount %s is absolute; use a path relative to deploy/", name, m.source)
				case m.bind:
					exists(t, m.source, "service "+name+" mount")
				case declared == nil || !hasKey(declared, m.source):
					t.Errorf("service %s: named volume %q is not declared under volumes:", name, m.source)
				}
			}
			for _, f := range strs(s["env_file"]) {
				exists(t, f, "service "+name+" env_file")
			}
			deps := s["depends_on"]
			var depNames []string
			if m, ok := deps.(map[string]any); ok {
				for k := range m {
					depNames = append(depNames, k)
				}
			} else {
				depNames = strs(deps)
			}
			for _, d := range depNames {
				if _, ok := c.services[d]; !ok {
					t.Errorf("service %s depends on unknown service %s", name, d)
				}
			}
			if s["build"] == nil {
				if img := str(s["image"]); !strings.Contains(img, ":") || strings.HasSuffix(img, ":latest") {
					t.Errorf("service %s: image %q should be pinned to a tag", name, img)
				}
			}
		}
	})

	t.Run("redis", func(t *testing.T) {
		s := c.service(t, "redis")
		if img := str(s["image"]); !strings.HasPrefix(img, "redis:7") {
			t.Errorf("redis image %q, want redis:7", img)
		}
		if cmd := strings.Join(strs(s["command"]), " "); !strings.Contains(cmd, "--appendonly yes") {
			t.Errorf("redis command %q lacks --appendonly yes", cmd)
		}
		if !slices.ContainsFunc(mounts(t, "redis", s), func(m mount) bool { return m.target == "/data" && !m.bind }) {
			t.Error("redis: no named volume on /data")
		}
	})

	t.Run("only the API and Grafana publish host ports, on loopback", func(t *testing.T) {
		for name, v := range c.services {
			p := v.(map[string]any)["ports"]
			if p != nil && name != "api" && name != "grafana" {
				t.Errorf("%s publishes host ports %v; use expose", name, p)
			}
			// "HOST_IP:HOST_PORT:CONTAINER_PORT" with HOST_IP 127.0.0.1:
			// "2333:2333" or "0.0.0.0:..." would listen on every interface.
			for _, e := range list(p) {
				s, ok := e.(string)
				if !ok || !strings.HasPrefix(s, "127.0.0.1:") || strings.Count(s, ":") != 2 {
					t.Errorf("%s: port %v is not bound to 127.0.0.1", name, e)
				}
			}
		}
	})

	t.Run("no committed token", func(t *testing.T) {
		// A tokens file with a plain token anywhere in deploy/ is a
		// secret everyone who cloned the repository holds.
		err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml") && !strings.HasSuffix(p, ".json") {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if regexp.MustCompile(`(?m)^\s*-?\s*"?token"?\s*:`).Match(data) {
				t.Errorf("%s holds a plain token", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// tokens-init runs the script on the volume the API reads.
		ti := c.service(t, "tokens-init")
		script, ok := c.resolve(t, "tokens-init", strs(ti["entrypoint"])[1])
		if !ok || filepath.Clean(script) != "init-tokens.sh" {
			t.Errorf("tokens-init: entrypoint %v does not run ./init-tokens.sh (%s)", ti["entrypoint"], script)
		}
		if !slices.ContainsFunc(mounts(t, "tokens-init", ti), func(m mount) bool {
			return m.source == "api-tokens" && m.target == env(ti)["MVQ_TOKENS_DIR"]
		}) {
			t.Errorf("tokens-init: MVQ_TOKENS_DIR %q is not the api-tokens volume", env(ti)["MVQ_TOKENS_DIR"])
		}
	})

	t.Run("api and worker pools", func(t *testing.T) {
		api, worker := c.service(t, "api"), c.service(t, "worker-default")
		// Every MVQ_* variable a service sets is one its binary reads.
		for role, names := range map[string][]string{"api": {"api"}, "worker": {"worker-default", "worker-gpu"}} {
			known := roleEnv(t, role)
			for _, name := range names {
				for k := range env(c.service(t, name)) {
					if strings.HasPrefix(k, "MVQ_") && !known[k] {
						t.Errorf("compose %s: %s is not read by the %s binary", name, k, role)
					}
				}
			}
		}
		binaries := dockerfileBinaries(t)
		pools := map[string]map[string]any{"worker-default": worker, "worker-gpu": c.service(t, "worker-gpu")}
		apiClusters := strings.Split(env(api)["MVQ_CLUSTERS"], ",")
		for name, s := range pools {
			cl := env(s)["MVQ_CLUSTERS"]
			if "worker-"+cl != name {
				t.Errorf("%s: MVQ_CLUSTERS=%q; a pool service is named worker-<its cluster>", name, cl)
			}
			if !slices.Contains(apiClusters, cl) {
				t.Errorf("%s: cluster %q is not in the API's MVQ_CLUSTERS %v", name, cl, apiClusters)
			}
		}
		for name, s := range map[string]map[string]any{"api": api, "worker-default": worker, "worker-gpu": pools["worker-gpu"]} {
			bin := strings.TrimSuffix(strings.TrimSuffix(name, "-default"), "-gpu")
			if s["build"] == nil {
				t.Errorf("%s: no build", name)
			}
			cmd := strs(s["command"])
			if len(cmd) == 0 || !binaries[filepath.Base(cmd[0])] {
				t.Errorf("%s: command %v does not start with a binary the Dockerfile builds (%v)", name, cmd, binaries)
			} else if filepath.Base(cmd[0]) != bin {
				t.Errorf("%s: command %v runs the wrong binary", name, cmd)
			}
			e := env(s)
			want := map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4318",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
				"MVQ_METRICS_LISTEN":          "0.0.0.0:9464",
				"MVQ_REDIS_URL":               "redis://redis:6379/0",
			}
			if bin == "api" {
				delete(want, "MVQ_METRICS_LISTEN") // the API serves /metrics on MVQ_LISTEN
			}
			for k, v := range want {
				if e[k] != v {
					t.Errorf("%s: %s=%q, want %q", name, k, e[k], v)
				}
			}
			if e["OTEL_SERVICE_NAME"] == "" {
				t.Errorf("%s: no OTEL_SERVICE_NAME", name)
			}
			// The warehouse is on the SeaweedFS S3 service, not a volume.
			wh := e["MVQ_WAREHOUSE"]
			u, err := url.Parse(wh)
			if err != nil || u.Scheme != "s3" || u.Host != "mvq" {
				t.Errorf("%s: MVQ_WAREHOUSE=%q, want s3://mvq/... (the bucket seaweedfs-init creates)", name, wh)
				continue
			}
			if q := u.Query(); q.Get("endpoint") != "http://seaweedfs:8333" || q.Get("use_path_style") != "true" || q.Get("region") == "" {
				t.Errorf("%s: MVQ_WAREHOUSE=%q: want endpoint=http://seaweedfs:8333, use_path_style=true and a region", name, wh)
			}
			if e["AWS_ACCESS_KEY_ID"] == "" || e["AWS_SECRET_ACCESS_KEY"] == "" {
				t.Errorf("%s: no AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for the S3 warehouse", name)
			}
			for _, m := range mounts(t, name, s) {
				if !m.bind && !(name == "api" && m.source == "api-tokens") {
					t.Errorf("%s: mounts volume %s; the warehouse is on S3, nothing is shared through volumes", name, m.source)
				}
			}
		}
		if env(api)["OTEL_SERVICE_NAME"] == env(worker)["OTEL_SERVICE_NAME"] {
			t.Error("api and worker share OTEL_SERVICE_NAME")
		}
		if l := env(api)["MVQ_LISTEN"]; l != "0.0.0.0:2333" {
			t.Errorf("api: MVQ_LISTEN=%q, want 0.0.0.0:2333", l)
		}
		// The API listens on every interface of its container: it must
		// authenticate, with the tokens file tokens-init writes into the
		// volume it mounts read-only.
		ac := auth.Config{Mode: env(api)["MVQ_AUTH"], TokensFile: env(api)["MVQ_AUTH_TOKENS_FILE"], JWKS: env(api)["MVQ_AUTH_JWKS"]}
		if err := ac.Check(env(api)["MVQ_LISTEN"]); err != nil || ac.Mode != auth.ModeTokens {
			t.Errorf("api: MVQ_AUTH=%q: %v; want tokens", ac.Mode, err)
		}
		if !slices.ContainsFunc(mounts(t, "api", api), func(m mount) bool {
			return m.source == "api-tokens" && m.target == filepath.Dir(ac.TokensFile)
		}) {
			t.Errorf("api: MVQ_AUTH_TOKENS_FILE %s is not in the api-tokens volume", ac.TokensFile)
		}
		if cond := get(api, "depends_on", "tokens-init", "condition"); cond != "service_completed_successfully" {
			t.Errorf("api: depends on tokens-init with condition %v, want service_completed_successfully", cond)
		}
		// Published on the host's loopback only.
		if p := strs(api["ports"]); !slices.Equal(p, []string{"127.0.0.1:2333:2333"}) {
			t.Errorf("api: ports %v, want only 127.0.0.1:2333:2333", p)
		}
		// Scalable: `docker compose up --scale worker-default=3`.
		for name, w := range pools {
			if w["container_name"] != nil {
				t.Errorf("%s: container_name prevents --scale", name)
			}
		}
	})

	t.Run("observability services", func(t *testing.T) {
		prom := c.service(t, "prometheus")
		args := strs(prom["command"])
		if !slices.Contains(args, "--enable-feature=exemplar-storage") {
			t.Errorf("prometheus: command %v lacks --enable-feature=exemplar-storage", args)
		}
		for _, flag := range []struct{ svc, flag, want string }{
			{"prometheus", "--config.file", "prometheus/prometheus.yml"},
			{"otel-collector", "--config", "otel-collector.yaml"},
			{"tempo", "-config.file", "tempo.yaml"},
		} {
			p := flagValue(strs(c.service(t, flag.svc)["command"]), flag.flag)
			host, ok := c.resolve(t, flag.svc, p)
			if !ok || filepath.Clean(host) != flag.want {
				t.Errorf("%s: %s=%q is %q on the host, want %s", flag.svc, flag.flag, p, host, flag.want)
			}
		}
		g := env(c.service(t, "grafana"))
		if g["GF_AUTH_ANONYMOUS_ENABLED"] != "true" || g["GF_AUTH_ANONYMOUS_ORG_ROLE"] != "Admin" {
			t.Errorf("grafana: want anonymous Admin for local use, env %v", g)
		}
		if p, ok := c.resolve(t, "grafana", "/etc/grafana/provisioning"); !ok || filepath.Clean(p) != "grafana/provisioning" {
			t.Errorf("grafana: /etc/grafana/provisioning is %q, want grafana/provisioning", p)
		}
		if home := g["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" {
			if p, ok := c.resolve(t, "grafana", home); !ok {
				t.Errorf("grafana: home dashboard %s is not mounted", home)
			} else {
				exists(t, p, "grafana home dashboard")
			}
		}
	})
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// ---- Dockerfile ----------------------------------------------------------------

// dockerfileBinaries checks the Dockerfile and returns the binaries it builds.
func dockerfileBinaries(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines.
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(data), " ")
	build := regexp.MustCompile(`[^\n]*go build[^\n]*`).FindString(text)
	if build == "" {
		t.Fatal("Dockerfile: no go build")
	}
	for _, want := range []string{"CGO_ENABLED=1", "-tags duckdb_arrow", "-o /out/"} {
		if !strings.Contains(build, want) {
			t.Errorf("Dockerfile: go build %q lacks %s", build, want)
		}
	}
	bins := map[string]bool{}
	for _, pkg := range regexp.MustCompile(`\./cmd/([a-z]+)`).FindAllStringSubmatch(build, -1) {
		bins[pkg[1]] = true
		// Packages are relative to the build context, the repository root.
		exists(t, filepath.Join("..", "cmd", pkg[1]), "Dockerfile package")
	}
	for _, b := range []string{"api", "worker", "mvq"} {
		if !bins[b] {
			t.Errorf("Dockerfile: go build does not build ./cmd/%s", b)
		}
	}
	for _, want := range []string{"FROM golang:${GO_VERSION}-bookworm AS build", "ARG GO_VERSION=1.26", "FROM debian:bookworm-slim", "ca-certificates", "COPY --from=build /out/ /usr/local/bin/"} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^ENTRYPOINT`).MatchString(text) {
		t.Error("Dockerfile: no ENTRYPOINT wanted; compose's command picks the binary")
	}
	users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(text, -1)
	if len(users) == 0 || strings.HasPrefix(users[len(users)-1][1], "root") || strings.HasPrefix(users[len(users)-1][1], "0") {
		t.Errorf("Dockerfile: runtime must run as a non-root USER, got %v", users)
	}
	for _, f := range regexp.MustCompile(`(?m)^COPY\s+([^-\n][^\n]*)\s+\S+$`).FindAllStringSubmatch(text, -1) {
		for _, src := range strings.Fields(f[1]) {
			if src != "." {
				exists(t, filepath.Join("..", src), "Dockerfile COPY source")
			}
		}
	}
	return bins
}

func TestDockerfile(t *testing.T) { dockerfileBinaries(t) }

// ---- Grafana provisioning ------------------------------------------------------

type datasource struct {
	name, typ, uid, url string
	jsonData            map[string]any
}

func loadDatasources(t *testing.T) map[string]datasource {
	t.Helper()
	out := map[string]datasource{}
	files, _ := filepath.Glob("grafana/provisioning/datasources/*.y*ml")
	if len(files) == 0 {
		t.Fatal("no datasource provisioning files")
	}
	for _, p := range files {
		for _, d := range list(readYAML(t, p)["datasources"]) {
			ds := datasource{str(get(d, "name")), str(get(d, "type")), str(get(d, "uid")), str(get(d, "url")), nil}
			ds.jsonData, _ = get(d, "jsonData").(map[string]any)
			if ds.uid == "" {
				t.Errorf("%s: datasource %s has no fixed uid", p, ds.name)
			}
			if _, dup := out[ds.uid]; dup {
				t.Errorf("%s: datasource uid %s twice", p, ds.uid)
			}
			out[ds.uid] = ds
		}
	}
	return out
}

func TestGrafanaProvisioning(t *testing.T) {
	// Every provisioning file parses.
	err := filepath.WalkDir("grafana/provisioning", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(p); ext != ".yml" && ext != ".yaml" {
			t.Errorf("%s: provisioning files should be YAML", p)
			return nil
		}
		if v := readYAML(t, p)["apiVersion"]; str(v) != "1" {
			t.Errorf("%s: apiVersion %v, want 1", p, v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := loadCompose(t)
	ds := loadDatasources(t)
	prom, tempo := ds["prometheus"], ds["tempo"]
	if prom.typ != "prometheus" || tempo.typ != "tempo" {
		t.Fatalf("want datasources uid prometheus (type prometheus) and uid tempo (type tempo), got %+v", ds)
	}
	// URLs point at compose services on their ports.
	tempoPort := str(get(readYAML(t, "tempo.yaml"), "server", "http_listen_port"))
	for _, d := range []struct {
		ds        datasource
		svc, port string
	}{{prom, "prometheus", "9090"}, {tempo, "tempo", tempoPort}} {
		u, err := url.Parse(d.ds.url)
		if err != nil || u.Hostname() != d.svc || u.Port() != d.port {
			t.Errorf("datasource %s: url %q, want http://%s:%s", d.ds.uid, d.ds.url, d.svc, d.port)
		}
		c.service(t, d.svc)
	}
	exemplars := list(prom.jsonData["exemplarTraceIdDestinations"])
	if len(exemplars) == 0 {
		t.Error("prometheus: no exemplarTraceIdDestinations")
	}
	for _, e := range exemplars {
		if _, ok := ds[str(get(e, "datasourceUid"))]; !ok || str(get(e, "datasourceUid")) != "tempo" || str(get(e, "name")) == "" {
			t.Errorf("prometheus: exemplar destination %v should name the trace label and point at uid tempo", e)
		}
	}
	for _, k := range []string{"tracesToMetrics", "serviceMap"} {
		if u := str(get(tempo.jsonData, k, "datasourceUid")); u != "prometheus" {
			t.Errorf("tempo: %s.datasourceUid=%q, want prometheus", k, u)
		}
	}

	// Dashboard providers read a folder Grafana has mounted from
	// grafana/dashboards.
	providers := 0
	files, _ := filepath.Glob("grafana/provisioning/dashboards/*.y*ml")
	for _, p := range files {
		for _, pr := range list(readYAML(t, p)["providers"]) {
			providers++
			dir := str(get(pr, "options", "path"))
			host, ok := c.resolve(t, "grafana", dir)
			if !ok || filepath.Clean(host) != "grafana/dashboards" {
				t.Errorf("%s: provider path %q is %q on the host, want grafana/dashboards", p, dir, host)
			}
		}
	}
	if providers == 0 {
		t.Error("no dashboard provider")
	}
}

// ---- Prometheus, collector, Tempo ----------------------------------------------

func TestPrometheusConfig(t *testing.T) {
	c := loadCompose(t)
	doc := readYAML(t, "prometheus/prometheus.yml")
	rules := strs(doc["rule_files"])
	if len(rules) == 0 {
		t.Error("prometheus.yml: no rule_files")
	}
	for _, r := range rules {
		host, ok := c.resolve(t, "prometheus", r)
		if !ok {
			t.Errorf("prometheus.yml: rule file %s is not mounted", r)
			continue
		}
		exists(t, host, "prometheus rule file")
	}
	if !slices.ContainsFunc(rules, func(r string) bool { return filepath.Base(r) == "alerts.yml" }) {
		t.Error("prometheus.yml: alerts.yml is not a rule file")
	}
	apiPort := port(t, env(c.service(t, "api"))["MVQ_LISTEN"], "api MVQ_LISTEN")
	workerPort := port(t, env(c.service(t, "worker-default"))["MVQ_METRICS_LISTEN"], "worker MVQ_METRICS_LISTEN")
	found := map[string]bool{}
	for _, sc := range list(doc["scrape_configs"]) {
		if p := str(get(sc, "metrics_path")); p != "" && p != "/metrics" {
			t.Errorf("job %v: metrics_path %s", get(sc, "job_name"), p)
		}
		for _, d := range list(get(sc, "dns_sd_configs")) {
			names := strs(get(d, "names"))
			if typ := str(get(d, "type")); typ != "A" {
				t.Errorf("dns_sd_configs %v: type %q, want A", names, typ)
			}
			for _, n := range names {
				svc := strings.TrimPrefix(n, "tasks.")
				if _, ok := c.services[svc]; !ok {
					t.Errorf("dns_sd_configs: %s is not a compose service", n)
				}
				found[n+":"+str(get(d, "port"))] = true
			}
		}
		for _, s := range list(get(sc, "static_configs")) {
			for _, target := range strs(get(s, "targets")) {
				found[target] = true
			}
		}
	}
	for _, want := range []string{"worker-default:" + workerPort, "tasks.worker-default:" + workerPort, "worker-gpu:" + workerPort, "api:" + apiPort} {
		if !found[want] {
			t.Errorf("prometheus.yml does not scrape %s (found %v)", want, found)
		}
	}
}

func TestCollectorConfig(t *testing.T) {
	c := loadCompose(t)
	doc := readYAML(t, "otel-collector.yaml")
	protocols, _ := get(doc, "receivers", "otlp", "protocols").(map[string]any)
	for _, p := range []string{"grpc", "http"} {
		if e := str(get(protocols, p, "endpoint")); !strings.HasPrefix(e, "0.0.0.0:") {
			t.Errorf("otlp %s receiver endpoint %q must listen on 0.0.0.0", p, e)
		}
	}
	// The SDK endpoint the services use reaches the HTTP receiver.
	u, _ := url.Parse(env(c.service(t, "worker-default"))["OTEL_EXPORTER_OTLP_ENDPOINT"])
	if u == nil || u.Hostname() != "otel-collector" || u.Port() != port(t, str(get(protocols, "http", "endpoint")), "otlp http") {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %v does not reach the collector's OTLP/HTTP receiver", u)
	}
	for name := range get(doc, "receivers").(map[string]any) {
		if strings.HasPrefix(name, "prometheus") {
			t.Errorf("receiver %s: the collector should scrape nothing", name)
		}
	}
	for _, kind := range []string{"receivers", "processors", "exporters"} {
		pipelines, _ := get(doc, "service", "pipelines").(map[string]any)
		for pname, p := range pipelines {
			for _, comp := range strs(get(p, kind)) {
				if get(doc, kind, comp) == nil && !hasKey(get(doc, kind).(map[string]any), comp) {
					t.Errorf("pipeline %s: %s %s is not defined", pname, kind, comp)
				}
			}
		}
	}
	for _, ext := range strs(get(doc, "service", "extensions")) {
		if !hasKey(get(doc, "extensions").(map[string]any), ext) {
			t.Errorf("extension %s is not defined", ext)
		}
	}
	tempo := readYAML(t, "tempo.yaml")
	tempoGRPC := port(t, str(get(tempo, "distributor", "receivers", "otlp", "protocols", "grpc", "endpoint")), "tempo otlp grpc")
	toTempo := false
	for _, exp := range strs(get(doc, "service", "pipelines", "traces", "exporters")) {
		if e := str(get(doc, "exporters", exp, "endpoint")); strings.HasPrefix(e, "tempo:") && port(t, e, exp) == tempoGRPC {
			toTempo = true
		}
	}
	if !toTempo {
		t.Error("the traces pipeline does not export to Tempo's OTLP gRPC receiver")
	}
}

func TestTempoConfig(t *testing.T) {
	c := loadCompose(t)
	doc := readYAML(t, "tempo.yaml")
	if p := str(get(doc, "server", "http_listen_port")); p != "3200" {
		t.Errorf("tempo http_listen_port %s, want 3200", p)
	}
	for _, rw := range list(get(doc, "metrics_generator", "storage", "remote_write")) {
		u, err := url.Parse(str(get(rw, "url")))
		if err != nil || u.Hostname() != "prometheus" || u.Path != "/api/v1/write" {
			t.Errorf("tempo remote_write %v, want http://prometheus:9090/api/v1/write", get(rw, "url"))
		}
		if !slices.Contains(strs(c.service(t, "prometheus")["command"]), "--web.enable-remote-write-receiver") {
			t.Error("tempo remote-writes to prometheus, which lacks --web.enable-remote-write-receiver")
		}
	}
	if !slices.ContainsFunc(mounts(t, "tempo", c.service(t, "tempo")), func(m mount) bool {
		return strings.HasPrefix(str(get(doc, "storage", "trace", "local", "path")), m.target)
	}) {
		t.Error("tempo: local trace storage is not on a volume")
	}
}

// ---- alert rules ----------------------------------------------------------------

func TestAlertRules(t *testing.T) {
	doc := readYAML(t, "prometheus/alerts.yml")
	metricsUsed := map[string]bool{}
	n := 0
	for _, g := range list(doc["groups"]) {
		for _, r := range list(get(g, "rules")) {
			n++
			name := str(get(r, "alert"))
			if name == "" {
				t.Errorf("rule %v has no alert name", r)
			}
			if _, err := time.ParseDuration(str(get(r, "for"))); get(r, "for") != nil && err != nil {
				t.Errorf("%s: for: %v", name, err)
			}
			if str(get(r, "labels", "severity")) == "" || str(get(r, "annotations", "summary")) == "" {
				t.Errorf("%s: wants labels.severity and annotations.summary", name)
			}
			m, err := ExprMetrics(str(get(r, "expr")))
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			for k := range m {
				metricsUsed[k] = true
			}
		}
	}
	if n < 4 {
		t.Errorf("%d alert rules, want at least 4", n)
	}
	for _, want := range []string{"mvq_refresh_jobs_total", "mvq_workitem_queue_wait_seconds_bucket", "mvq_workers_active", "mvq_queue_depth", "mvq_commit_conflicts_total"} {
		if !metricsUsed[want] {
			t.Errorf("no alert on %s", want)
		}
	}
}

// ---- dashboards -------------------------------------------------------------------

var builtinDatasources = map[string]bool{"-- Grafana --": true, "grafana": true, "-- Mixed --": true, "-- Dashboard --": true}

// panels returns every panel, rows' nested panels included.
func panels(d map[string]any) []map[string]any {
	var out []map[string]any
	var add func(l []any)
	add = func(l []any) {
		for _, p := range l {
			if m, ok := p.(map[string]any); ok {
				out = append(out, m)
				add(list(m["panels"]))
			}
		}
	}
	add(list(d["panels"]))
	return out
}

var varRef = regexp.MustCompile(`\$(?:\{([a-zA-Z0-9_]+)(?:[:.][^}]*)?\}|([a-zA-Z0-9_]+))`)

func TestDashboards(t *testing.T) {
	ds := loadDatasources(t)
	files, _ := filepath.Glob("grafana/dashboards/*.json")
	want := map[string]string{"refresh-overview.json": "mvq-refresh-overview", "refresh-job-drilldown.json": "mvq-refresh-job"}
	seen := map[string]bool{}
	for _, p := range files {
		d := readJSON(t, p)
		base := filepath.Base(p)
		if uid, ok := want[base]; ok && d["uid"] != uid {
			t.Errorf("%s: uid %v, want %s", p, d["uid"], uid)
		}
		seen[base] = true
		if v, _ := d["schemaVersion"].(float64); v < 39 {
			t.Errorf("%s: schemaVersion %v, want >= 39", p, d["schemaVersion"])
		}
		if str(d["title"]) == "" {
			t.Errorf("%s: no title", p)
		}
		vars := map[string]bool{}
		for _, v := range list(get(d, "templating", "list")) {
			vars[str(get(v, "name"))] = true
		}
		ids := map[float64]bool{}
		for _, pn := range panels(d) {
			id, _ := pn["id"].(float64)
			if ids[id] {
				t.Errorf("%s: panel id %v twice", p, id)
			}
			ids[id] = true
			if get(pn, "gridPos", "w") == nil || get(pn, "gridPos", "h") == nil {
				t.Errorf("%s: panel %q has no gridPos", p, pn["title"])
			}
			// Queries may only use variables the dashboard defines.
			for _, tg := range list(pn["targets"]) {
				for _, k := range []string{"expr", "query"} {
					q, _ := get(tg, k).(string)
					for _, m := range varRef.FindAllStringSubmatch(q, -1) {
						name := m[1] + m[2]
						if !strings.HasPrefix(name, "__") && !vars[name] {
							t.Errorf("%s: panel %q uses undefined variable $%s", p, pn["title"], name)
						}
					}
				}
			}
		}
		// Every datasource reference resolves to a provisioned uid.
		var walk func(v any, where string)
		walk = func(v any, where string) {
			switch v := v.(type) {
			case map[string]any:
				if ref, ok := v["datasource"]; ok {
					uid := str(get(ref, "uid"))
					if s, ok := ref.(string); ok {
						uid = s
					}
					_, provisioned := ds[uid]
					if uid == "" || !(provisioned || builtinDatasources[uid] || strings.HasPrefix(uid, "$")) {
						t.Errorf("%s: %s uses datasource %v, not provisioned (uids %v)", p, where, ref, slices.Sorted(maps.Keys(ds)))
					} else if provisioned && get(ref, "type") != nil && str(get(ref, "type")) != ds[uid].typ {
						t.Errorf("%s: %s: datasource uid %s has type %s, not %v", p, where, uid, ds[uid].typ, get(ref, "type"))
					}
				}
				for k, e := range v {
					if k != "datasource" {
						walk(e, where+"."+k)
					}
				}
			case []any:
				for i, e := range v {
					walk(e, fmt.Sprintf("%s[%d]", where, i))
				}
			}
		}
		walk(d, "dashboard")
	}
	for f := range want {
		if !seen[f] {
			t.Errorf("dashboard %s is missing", f)
		}
	}

	t.Run("overview covers the refresh pipeline", func(t *testing.T) {
		d := readJSON(t, "grafana/dashboards/refresh-overview.json")
		var exprs []string
		for _, pn := range panels(d) {
			for _, tg := range list(pn["targets"]) {
				exprs = append(exprs, str(get(tg, "expr")))
			}
		}
		has := func(parts ...string) bool {
			return slices.ContainsFunc(exprs, func(e string) bool {
				for _, p := range parts {
					if !strings.Contains(e, p) {
						return false
					}
				}
				return true
			})
		}
		for _, want := range [][]string{
			{"mvq_refresh_jobs_total", "state", "kind"},
			{"mvq_refresh_jobs_total", "FAILED"},
			{"mvq_refresh_rows_read_total"},
			{"mvq_refresh_rows_written_total"},
			{"histogram_quantile(0.5", "mvq_refresh_job_duration_seconds_bucket"},
			{"histogram_quantile(0.95", "mvq_refresh_job_duration_seconds_bucket"},
			{"mvq_queue_depth", "cluster"},
			{"histogram_quantile(0.95", "mvq_workitem_queue_wait_seconds_bucket", "cluster"},
			{"mvq_workitems_running", "/", "mvq_workers_active"},
			{"histogram_quantile(0.95", "mvq_commit_duration_seconds_bucket"},
			{"mvq_commit_conflicts_total"},
			{"mvq_http_requests_total", "route", "status"},
		} {
			if !has(want...) {
				t.Errorf("refresh overview: no query with %q", want)
			}
		}
	})

	t.Run("drill-down follows one trace", func(t *testing.T) {
		d := readJSON(t, "grafana/dashboards/refresh-job-drilldown.json")
		textbox := false
		for _, v := range list(get(d, "templating", "list")) {
			textbox = textbox || str(get(v, "name")) == "trace_id" && str(get(v, "type")) == "textbox"
		}
		if !textbox {
			t.Error("no trace_id textbox variable")
		}
		var tracePanel, phaseTable bool
		for _, pn := range panels(d) {
			for _, tg := range list(pn["targets"]) {
				q := str(get(tg, "query"))
				if str(get(tg, "datasource", "uid")) != "tempo" {
					continue
				}
				if pn["type"] == "traces" && strings.Contains(q, "${trace_id}") {
					tracePanel = true
				}
				if pn["type"] == "table" && str(get(tg, "queryType")) == "traceql" && strings.Contains(q, "${trace_id}") {
					all := true
					for _, s := range []string{"refresh.plan", "refresh.workitem", "messaging.queue_wait_ms", "refresh.read", "refresh.apply", "refresh.write", "table.commit"} {
						all = all && strings.Contains(q, s)
					}
					if all && slices.ContainsFunc(list(pn["transformations"]), func(tr any) bool { return str(get(tr, "id")) == "groupBy" }) {
						phaseTable = true
					}
				}
			}
		}
		if !tracePanel {
			t.Error("no Tempo traces panel for ${trace_id}")
		}
		if !phaseTable {
			t.Error("no TraceQL table grouping the trace's phase spans by name")
		}
	})
}

// ---- the metric contract ------------------------------------------------------------

// checkFS runs the whole contract check over the deploy files in fsys.
func checkFS(fsys fs.FS) ([]error, error) {
	contract, err := contractFS(fsys)
	if err != nil {
		return nil, err
	}
	qs, err := queriesFS(fsys)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, q := range qs {
		used, err := ExprMetrics(q.Expr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v\n\t%s", q.Source, err, q.Expr))
			continue
		}
		if len(used) == 0 {
			errs = append(errs, fmt.Errorf("%s: queries no metric\n\t%s", q.Source, q.Expr))
		}
		for _, e := range CheckContract(used, contract) {
			errs = append(errs, fmt.Errorf("%s: %v\n\t%s", q.Source, e, q.Expr))
		}
		// Labels a legend or alert template shows must exist on the metrics.
		var avail []string
		for name := range used {
			l, _ := SeriesLabels(contract, name)
			avail = append(avail, l...)
		}
		for _, r := range q.Refs {
			if !slices.Contains(avail, r) {
				errs = append(errs, fmt.Errorf("%s: template references label %q that none of %v has", q.Source, r, slices.Sorted(maps.Keys(used))))
			}
		}
	}
	return errs, nil
}

func TestMetricContract(t *testing.T) {
	contract, err := contractFS(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	if got := contract["mvq_refresh_job_duration_seconds_bucket"]; !slices.Equal(got, []string{"kind", "state", "le"}) {
		t.Errorf("metrics.txt parsed wrongly: %v", got)
	}
	if got, ok := contract["mvq_commit_conflicts_total"]; !ok || len(got) != 0 {
		t.Errorf("metrics.txt: mvq_commit_conflicts_total = %v, %v", got, ok)
	}
	errs, err := checkFS(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Error(e)
	}

	// The exported, embedded view agrees with the files on disk.
	qs, err := queriesFS(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	disk, err := metricsOf(qs)
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := DashboardMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(disk, embedded) {
		t.Errorf("DashboardMetrics (embedded) %v differs from the files %v", embedded, disk)
	}
	if len(qs) < 20 {
		t.Errorf("only %d PromQL queries found; is the walker missing some?", len(qs))
	}
	var unused []string
	for name := range contract {
		if _, ok := disk[name]; !ok {
			base := strings.TrimSuffix(name, "_bucket")
			if _, ok := disk[base+"_count"]; !ok {
				unused = append(unused, name)
			}
		}
	}
	if len(unused) > 0 {
		t.Logf("contract metrics no dashboard or alert queries: %v", unused)
	}

	t.Run("rejects unknown metrics and labels", func(t *testing.T) {
		for _, tc := range []struct {
			expr string
			want string // "" when the expression is valid
		}{
			{`sum(rate(mvq_refresh_jobs_total{state="FAILED"}[5m]))`, ""},
			{`histogram_quantile(0.95, sum by (le, cluster) (rate(mvq_workitem_queue_wait_seconds_bucket[5m])))`, ""},
			{`sum(rate(mvq_commit_duration_seconds_count[5m])) / sum(rate(mvq_commit_duration_seconds_sum[5m]))`, ""},
			{`sum(rate(mvq_refresh_jobs_fake_total[5m]))`, "metric mvq_refresh_jobs_fake_total is not in metrics.txt"},
			{`sum by (pod) (rate(mvq_refresh_jobs_total[5m]))`, `metric mvq_refresh_jobs_total: label "pod"`},
			{`sum(rate(mvq_refresh_jobs_total[5m])) by (instance)`, `label "instance"`},
			{`mvq_queue_depth{job="mvq-worker"}`, `label "job"`},
			{`mvq_commit_duration_seconds_sum{le="1"}`, `metric mvq_commit_duration_seconds_sum: label "le"`},
			{`mvq_workers_active > 0 unless on (cluster, zone) mvq_queue_depth`, `label "zone"`},
			{`{__name__="mvq_not_a_metric"}`, "metric mvq_not_a_metric is not in metrics.txt"},
			{`mvq_refresh_job_duration_seconds{kind="x"}`, "metric mvq_refresh_job_duration_seconds is not in metrics.txt"},
		} {
			used, err := ExprMetrics(tc.expr)
			if err != nil {
				t.Errorf("%s: %v", tc.expr, err)
				continue
			}
			errs := CheckContract(used, contract)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("%s: rejected: %v", tc.expr, errs)
			case tc.want != "" && (len(errs) == 0 || !strings.Contains(fmt.Sprint(errs), tc.want)):
				t.Errorf("%s: want an error with %q, got %v", tc.expr, tc.want, errs)
			}
		}
	})

	t.Run("rejects a dashboard querying an unknown metric", func(t *testing.T) {
		// The real deploy files, plus one panel with a fake metric.
		fsys := fstest.MapFS{}
		for _, p := range []string{"metrics.txt", "prometheus/alerts.yml", "grafana/provisioning/datasources/datasources.yml", "grafana/dashboards/refresh-job-drilldown.json"} {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			fsys[p] = &fstest.MapFile{Data: data}
		}
		d := readJSON(t, "grafana/dashboards/refresh-overview.json")
		d["panels"] = append(list(d["panels"]), map[string]any{
			"id": 999, "type": "timeseries", "title": "Bogus",
			"targets": []any{map[string]any{"refId": "A", "expr": `sum by (cluster) (rate(mvq_bogus_rows_total{cluster=~"$cluster"}[$__rate_interval]))`}},
		}, map[string]any{
			"id": 1000, "type": "timeseries", "title": "Bogus label",
			"targets": []any{map[string]any{"refId": "A", "expr": `sum by (pod) (mvq_workitems_running)`, "legendFormat": "{{node}}"}},
		})
		data, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		fsys["grafana/dashboards/refresh-overview.json"] = &fstest.MapFile{Data: data}
		errs, err := checkFS(fsys)
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprint(errs)
		for _, want := range []string{
			`"Bogus"`, "metric mvq_bogus_rows_total is not in metrics.txt",
			`metric mvq_workitems_running: label "pod"`, `template references label "node"`,
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("want an error with %q, got %v", want, errs)
			}
		}
		if len(errs) != 3 {
			t.Errorf("want exactly 3 errors (unknown metric, unknown label, unknown legend label), got %d: %v", len(errs), errs)
		}
	})
}

func TestExprMetrics(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want map[string][]string
	}{
		{`sum by (state, kind) (rate(mvq_refresh_jobs_total{kind=~"$kind"}[$__rate_interval]))`,
			map[string][]string{"mvq_refresh_jobs_total": {"kind", "state"}}},
		{`sum(rate(a_total{x="1"}[5m] offset 1h)) by (y) / ignoring (z) sum(b)`,
			map[string][]string{"a_total": {"x", "y", "z"}, "b": {"z"}}},
		{`histogram_quantile(0.95, sum without (pod) (rate(h_bucket{c=~"${cluster:regex}"}[5m:1m])))`,
			map[string][]string{"h_bucket": {"c", "pod"}}},
		{`max by (cluster) (q{state="pending"}) > 0 unless on (cluster) max by (cluster) (w) > 0`,
			map[string][]string{"q": {"cluster", "state"}, "w": {"cluster"}}},
		{`a / on (x) group_left (y) b`, map[string][]string{"a": {"x", "y"}, "b": {"x", "y"}}},
		{`label_values(mvq_queue_depth{state="pending"}, cluster)`, map[string][]string{"mvq_queue_depth": {"cluster", "state"}}},
		{`{__name__="n", a!="b"} * 1e-9 + -0.5`, map[string][]string{"n": {"a"}}},
		{"# comment\nsum(x) / clamp_min(count(y), 1)", map[string][]string{"x": {}, "y": {}}},
		{`topk(5, sum by (route) (rate(r[5m]))) and bool vector(1)`, map[string][]string{"r": {"route"}}},
	} {
		got, err := ExprMetrics(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		for k, v := range got {
			if v == nil {
				got[k] = []string{}
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`sum(rate(x[5m])`, `x{a="b"`, `sum by (a)`, `{a="b"}`, `x{a}`, `by (a) x`, `label_values(cluster)`} {
		if _, err := ExprMetrics(bad); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
}
