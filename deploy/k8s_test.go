package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/mvq-dev/mvq/service"
)

// The Kubernetes manifests are rendered with kustomize's library (what
// `kubectl apply -k` runs) and validated offline: every object is decoded
// strictly into the Kubernetes API's own Go types (k8s.io/api, the source
// the published schemas are generated from; the Prometheus Operator's for
// the ServiceMonitor and the PrometheusRule), so an unknown field, a wrong type or a bad quantity
// fails, and names and labels go through apimachinery's validation. The
// ScaledObject is decoded into scaledObject below, a copy of the fields of
// KEDA's keda.sh/v1alpha1 ScaledObjectSpec (KEDA's module is not available
// to this build). kubeconform was not used: it fetches its schemas over the
// network at run time.

// scaledObject is KEDA's keda.sh/v1alpha1 ScaledObject, the fields of
// its spec as KEDA v2 defines them.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			Name                   string `json:"name"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval  *int32 `json:"pollingInterval,omitempty"`
		InitialCooldown  *int32 `json:"initialCooldownPeriod,omitempty"`
		CooldownPeriod   *int32 `json:"cooldownPeriod,omitempty"`
		IdleReplicaCount *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount  *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount  *int32 `json:"maxReplicaCount,omitempty"`
		Triggers         []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			MetricType        string            `json:"metricType,omitempty"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// rendered is one kustomization's output, decoded.
type rendered struct {
	deployments   []*appsv1.Deployment
	statefulsets  []*appsv1.StatefulSet
	services      []*corev1.Service
	configMaps    map[string]*corev1.ConfigMap
	secrets       map[string]*corev1.Secret
	pdbs          []*policyv1.PodDisruptionBudget
	scaledObjects []*scaledObject
	monitors      []*monitoringv1.ServiceMonitor
	rules         []*monitoringv1.PrometheusRule
	jobs          []*batchv1.Job
	ingresses     []*networkingv1.Ingress
	kinds         map[string]int
	// external are the Secrets the operator creates, which containers may
	// refer to though they are not rendered.
	external map[string]bool
}

func render(t *testing.T, dir string, external ...string) *rendered {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out := &rendered{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}, kinds: map[string]int{}, external: map[string]bool{}}
	for _, s := range external {
		out.external[s] = true
	}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kind, name := r.GetKind(), r.GetName()
		decode := func(v any) {
			t.Helper()
			if err := yaml.UnmarshalStrict(y, v); err != nil {
				t.Errorf("%s %s/%s does not match its schema: %v", dir, kind, name, err)
			}
		}
		wantAPI := map[string]string{"Deployment": "apps/v1", "StatefulSet": "apps/v1", "Service": "v1", "ConfigMap": "v1", "Secret": "v1",
			"PodDisruptionBudget": "policy/v1", "ScaledObject": "keda.sh/v1alpha1", "ServiceMonitor": "monitoring.coreos.com/v1",
			"PrometheusRule": "monitoring.coreos.com/v1", "Job": "batch/v1", "Ingress": "networking.k8s.io/v1"}
		if api, ok := wantAPI[kind]; !ok {
			t.Errorf("%s: unexpected kind %s (%s)", dir, kind, name)
			continue
		} else if got := r.GetApiVersion(); got != api {
			t.Errorf("%s %s/%s: apiVersion %s, want %s", dir, kind, name, got, api)
		}
		out.kinds[kind]++
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			t.Errorf("%s %s name %q: %s", dir, kind, name, msg)
		}
		for k, v := range r.GetLabels() {
			for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
				t.Errorf("%s %s/%s label %s=%s: %s", dir, kind, name, k, v, msg)
			}
		}
		switch kind {
		case "Deployment":
			var d appsv1.Deployment
			decode(&d)
			out.deployments = append(out.deployments, &d)
		case "StatefulSet":
			var s appsv1.StatefulSet
			decode(&s)
			out.statefulsets = append(out.statefulsets, &s)
		case "Service":
			var s corev1.Service
			decode(&s)
			out.services = append(out.services, &s)
		case "ConfigMap":
			var c corev1.ConfigMap
			decode(&c)
			out.configMaps[name] = &c
		case "Secret":
			var s corev1.Secret
			decode(&s)
			out.secrets[name] = &s
		case "PodDisruptionBudget":
			var p policyv1.PodDisruptionBudget
			decode(&p)
			out.pdbs = append(out.pdbs, &p)
		case "ScaledObject":
			var s scaledObject
			decode(&s)
			out.scaledObjects = append(out.scaledObjects, &s)
		case "ServiceMonitor":
			var s monitoringv1.ServiceMonitor
			decode(&s)
			out.monitors = append(out.monitors, &s)
		case "PrometheusRule":
			var p monitoringv1.PrometheusRule
			decode(&p)
			out.rules = append(out.rules, &p)
		case "Job":
			var j batchv1.Job
			decode(&j)
			out.jobs = append(out.jobs, &j)
		case "Ingress":
			var i networkingv1.Ingress
			decode(&i)
			out.ingresses = append(out.ingresses, &i)
		}
	}
	return out
}

// knownEnv is every environment variable the binaries read: the MVQ_*
// names in the non-test sources of the packages they are built from, the
// OTEL_* names the OpenTelemetry SDK reads, and the AWS SDK's.
func knownEnv(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	re := regexp.MustCompile(`"(MVQ_[A-Z0-9_]*[A-Z0-9])"`)
	for _, dir := range []string{"service", "auth", "telemetry", "cmd/api", "cmd/worker", "table", "jobs", "httpapi"} {
		files, _ := filepath.Glob(filepath.Join("..", dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				known[m[1]] = true
			}
		}
	}
	for _, k := range []string{"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
		"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"} {
		known[k] = true
	}
	return known
}

// roleEnv is knownEnv for one binary (api or worker): less the variables
// that are flags of the other binaries only (the API does not read
// MVQ_METRICS_LISTEN, a worker not MVQ_LISTEN). A binary's flags are read
// off its -h, which names each flag's variable.
func roleEnv(t *testing.T, role string) map[string]bool {
	t.Helper()
	flagged := func(role string) map[string]bool {
		var usage bytes.Buffer
		_, err := service.LoadConfig(role, []string{"-h"}, func(string) string { return "" }, &usage)
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s -h: %v", role, err)
		}
		names := map[string]bool{}
		for _, m := range regexp.MustCompile(`\((MVQ_[A-Z0-9_]+)\)`).FindAllStringSubmatch(usage.String(), -1) {
			names[m[1]] = true
		}
		return names
	}
	mine := flagged(role)
	if len(mine) == 0 {
		t.Fatalf("%s -h lists no variables", role)
	}
	known := knownEnv(t)
	for _, other := range []string{"api", "worker", "dev"} {
		for name := range flagged(other) {
			if !mine[name] {
				delete(known, name)
			}
		}
	}
	return known
}

// env returns a container's environment: its ConfigMap entries, then its
// own variables (literal values only; secret refs as "<secret>").
func (r *rendered) env(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			continue
		}
		cm := r.configMaps[from.ConfigMapRef.Name]
		if cm == nil {
			t.Errorf("container %s: envFrom ConfigMap %s is not rendered", c.Name, from.ConfigMapRef.Name)
			continue
		}
		for k, v := range cm.Data {
			out[k] = v
		}
	}
	for _, e := range c.Env {
		out[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			out[e.Name] = "<secret>"
			s := r.secrets[e.ValueFrom.SecretKeyRef.Name]
			if r.external[e.ValueFrom.SecretKeyRef.Name] {
				if s != nil {
					t.Errorf("container %s: Secret %s is rendered: it must come from the operator", c.Name, s.Name)
				}
			} else if s == nil {
				t.Errorf("container %s: %s refers to Secret %s, not rendered", c.Name, e.Name, e.ValueFrom.SecretKeyRef.Name)
			} else if _, ok := s.StringData[e.ValueFrom.SecretKeyRef.Key]; !ok {
				if _, ok := s.Data[e.ValueFrom.SecretKeyRef.Key]; !ok {
					t.Errorf("container %s: %s refers to key %s, not in Secret %s", c.Name, e.Name, e.ValueFrom.SecretKeyRef.Key, s.Name)
				}
			}
		}
	}
	return out
}

var queryCluster = regexp.MustCompile(`mvq_queue_depth\{cluster="([^"]+)"`)

func TestKubernetesManifests(t *testing.T) {
	binaries := dockerfileBinaries(t)
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	known := knownEnv(t)
	// The base runs on one node with no add-on: only built-in kinds. The
	// production overlay adds KEDA, the Prometheus Operator's kinds and an
	// Ingress, and takes the store's keys from a Secret the operator makes.
	for _, tc := range []struct {
		dir        string
		production bool
		external   []string
	}{
		{dir: "k8s/base"},
		{dir: "k8s/overlays/production", production: true, external: []string{"mvq-secrets"}},
	} {
		dir := tc.dir
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir, tc.external...)
			var pools []string
			var apiClusters []string
			for _, d := range r.deployments {
				spec := d.Spec.Template.Spec
				sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
				if err != nil || !sel.Matches(labelSet(d.Spec.Template.Labels)) {
					t.Errorf("%s: selector %v does not select its pod template (%v)", d.Name, d.Spec.Selector, err)
				}
				if len(spec.Containers) != 1 {
					t.Fatalf("%s: %d containers, want 1", d.Name, len(spec.Containers))
				}
				c := spec.Containers[0]
				// The image is the Dockerfile's (docker build -f deploy/Dockerfile -t mvq .),
				// run as its user, with the command naming a binary it builds.
				if repo := strings.SplitN(c.Image, ":", 2)[0]; filepath.Base(repo) != "mvq" {
					t.Errorf("%s: image %q is not the mvq image", d.Name, c.Image)
				}
				if len(c.Args) == 0 || !binaries[c.Args[0]] || len(c.Command) != 0 {
					t.Errorf("%s: args %v (command %v) do not start a binary the Dockerfile builds %v", d.Name, c.Args, c.Command, binaries)
				}
				if sc := spec.SecurityContext; sc == nil || sc.RunAsUser == nil || !strings.Contains(string(dockerfile), fmt.Sprintf("USER %d:", *sc.RunAsUser)) {
					t.Errorf("%s: runAsUser does not match the Dockerfile's USER", d.Name)
				}
				env := r.env(t, c)
				for k := range env {
					if !known[k] {
						t.Errorf("%s: environment variable %s is read by no binary", d.Name, k)
					} else if len(c.Args) > 0 && !roleEnv(t, c.Args[0])[k] {
						t.Errorf("%s: environment variable %s is not read by %s", d.Name, k, c.Args[0])
					}
				}
				if _, err := service.ParseRedisURL(env["MVQ_REDIS_URL"]); err != nil {
					t.Errorf("%s: %v", d.Name, err)
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
					t.Errorf("%s: no cpu and memory requests", d.Name)
				}
				// Probes: /readyz and /healthz on the port the binary listens on.
				listen := map[string]string{"api": "MVQ_LISTEN", "worker": "MVQ_METRICS_LISTEN"}[c.Args[0]]
				_, port, _ := net.SplitHostPort(env[listen])
				for what, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
					if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != what {
						t.Errorf("%s: probe for %s missing or wrong: %+v", d.Name, what, p)
						continue
					}
					if n := containerPort(c, p.HTTPGet.Port.String()); fmt.Sprint(n) != port || port == "" {
						t.Errorf("%s: %s probe port %s is %d, the binary listens on %q (%s)", d.Name, what, p.HTTPGet.Port.String(), n, port, listen)
					}
				}
				grace := time.Duration(0)
				if spec.TerminationGracePeriodSeconds != nil {
					grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
				}
				switch c.Args[0] {
				case "api":
					apiClusters = strings.Split(env["MVQ_CLUSTERS"], ",")
					if grace <= service.APIDrainTimeout {
						t.Errorf("%s: grace period %v is not longer than the API's drain (%v)", d.Name, grace, service.APIDrainTimeout)
					}
				case "worker":
					if need := service.WorkerShutdownTimeout + service.WorkerDrainTimeout; grace <= need {
						t.Errorf("%s: grace period %v is not longer than the worker's shutdown (%v)", d.Name, grace, need)
					}
					cluster := d.Labels["mvq.dev/cluster"]
					if env["MVQ_CLUSTERS"] != cluster || cluster == "" {
						t.Errorf("%s: MVQ_CLUSTERS %q, label mvq.dev/cluster %q: one pool per Deployment, named alike", d.Name, env["MVQ_CLUSTERS"], cluster)
					}
					pools = append(pools, cluster)
					r.checkPool(t, d, cluster, tc.production)
				}
				r.checkWarehouse(t, d.Name, env)
			}
			for _, p := range pools {
				if !slices.Contains(apiClusters, p) {
					t.Errorf("pool %s is not in the API's MVQ_CLUSTERS %v: no gauges until its first worker runs", p, apiClusters)
				}
			}
			if !slices.Contains(pools, "default") {
				t.Error("no worker pool for the default cluster")
			}
			r.checkNoShippedToken(t)
			if !tc.production {
				for _, kind := range []string{"ScaledObject", "ServiceMonitor", "PrometheusRule", "Ingress"} {
					if r.kinds[kind] != 0 {
						t.Errorf("the base renders a %s: it needs an add-on a bare cluster lacks", kind)
					}
				}
				r.checkSeaweedFS(t)
			} else {
				if len(r.monitors) != 1 {
					t.Fatalf("%d ServiceMonitors, want 1", len(r.monitors))
				}
				r.checkMonitor(t, r.monitors[0])
				r.checkMonitoring(t)
				r.checkIngress(t)
			}
			for _, s := range r.statefulsets {
				if s.Name == "mvq-redis" && !strings.Contains(strings.Join(s.Spec.Template.Spec.Containers[0].Args, " "), "--appendonly yes") {
					t.Errorf("redis runs without --appendonly yes")
				}
				if len(s.Spec.VolumeClaimTemplates) == 0 {
					t.Errorf("%s: no persistent volume", s.Name)
				}
			}
		})
	}
}

func labelSet(m map[string]string) labelsMap { return labelsMap(m) }

// labelsMap implements labels.Labels for a plain map.
type labelsMap map[string]string

func (l labelsMap) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelsMap) Get(k string) string            { return l[k] }
func (l labelsMap) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

func containerPort(c corev1.Container, port string) int32 {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return p.ContainerPort
		}
	}
	return 0
}

// checkPool: a worker pool has a PodDisruptionBudget and, when autoscaled,
// a ScaledObject selecting it, which scales on that pool's queue.
func (r *rendered) checkPool(t *testing.T, d *appsv1.Deployment, cluster string, autoscaled bool) {
	t.Helper()
	pdb := false
	for _, p := range r.pdbs {
		if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err == nil && sel.Matches(labelSet(d.Spec.Template.Labels)) {
			if pdb {
				t.Errorf("%s: more than one PodDisruptionBudget", d.Name)
			}
			pdb = true
		}
	}
	if !pdb {
		t.Errorf("%s: no PodDisruptionBudget", d.Name)
	}
	var so *scaledObject
	for _, s := range r.scaledObjects {
		if s.Spec.ScaleTargetRef.Name == d.Name {
			so = s
		}
	}
	if !autoscaled {
		if so != nil {
			t.Errorf("%s: a ScaledObject (KEDA) in the base", d.Name)
		}
		return
	}
	if so == nil {
		t.Errorf("%s: no ScaledObject", d.Name)
		return
	}
	if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount > 1 || so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount < 1 {
		t.Errorf("%s: min/max replicas %v/%v, want min 0 or 1", so.Name, so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "prometheus" {
		t.Fatalf("%s: want one prometheus trigger", so.Name)
	}
	md := so.Spec.Triggers[0].Metadata
	q := md["query"]
	m := queryCluster.FindStringSubmatch(q)
	if m == nil || m[1] != cluster {
		t.Errorf("%s: query %q does not read pool %s's mvq_queue_depth", so.Name, q, cluster)
	}
	if metrics, err := ExprMetrics(q); err != nil {
		t.Errorf("%s: query: %v", so.Name, err)
	} else {
		contract, err := Contract()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range CheckContract(metrics, contract) {
			t.Errorf("%s: %v", so.Name, e)
		}
	}
	for _, k := range []string{"serverAddress", "threshold"} {
		if md[k] == "" {
			t.Errorf("%s: trigger metadata lacks %s", so.Name, k)
		}
	}
}

// checkMonitor: the ServiceMonitor selects the API's and every pool's
// Service and scrapes /metrics on a port each has.
func (r *rendered) checkMonitor(t *testing.T, m *monitoringv1.ServiceMonitor) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]bool{}
	for _, e := range m.Spec.Endpoints {
		ports[e.Port] = e.Path == "/metrics"
	}
	for _, s := range r.services {
		if s.Name == "mvq-redis" {
			continue
		}
		if !sel.Matches(labelSet(s.Labels)) {
			t.Errorf("ServiceMonitor does not select Service %s", s.Name)
			continue
		}
		if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return ports[p.Name] }) {
			t.Errorf("ServiceMonitor scrapes no port of Service %s", s.Name)
		}
	}
}

// checkNoShippedToken: no rendered Secret or ConfigMap holds a tokens
// file or a token (everyone with the repository would hold it); the API
// reads its tokens file from the Secret mvq-api-tokens, which the operator
// creates and the manifests do not render, and it is not optional, so the
// API does not start without it.
func (r *rendered) checkNoShippedToken(t *testing.T) {
	t.Helper()
	plain := regexp.MustCompile(`(?m)^\s*-?\s*"?(token|token_sha256)"?\s*:`)
	for name, s := range r.secrets {
		for k, v := range s.StringData {
			if strings.Contains(k, "token") || plain.MatchString(v) {
				t.Errorf("Secret %s ships %s: a token everyone with the repository holds", name, k)
			}
		}
		for k, v := range s.Data {
			if strings.Contains(k, "token") || plain.Match(v) {
				t.Errorf("Secret %s ships %s: a token everyone with the repository holds", name, k)
			}
		}
	}
	for name, c := range r.configMaps {
		for k, v := range c.Data {
			if plain.MatchString(v) {
				t.Errorf("ConfigMap %s: %s holds a token", name, k)
			}
		}
	}
	var found bool
	for _, d := range r.deployments {
		if d.Name != "mvq-api" {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != "tokens" {
				continue
			}
			found = true
			switch {
			case v.Secret == nil || v.Secret.SecretName != "mvq-api-tokens":
				t.Errorf("mvq-api: tokens volume %+v, want the Secret mvq-api-tokens", v.VolumeSource)
			case r.secrets["mvq-api-tokens"] != nil:
				t.Error("the Secret mvq-api-tokens is rendered: it must come from the operator")
			case v.Secret.Optional != nil && *v.Secret.Optional:
				t.Error("mvq-api: the tokens Secret is optional: the API would start without tokens")
			}
		}
	}
	if !found {
		t.Error("mvq-api: no tokens volume")
	}
}

// checkWarehouse: every pod reaches one warehouse, an object store (a
// file:// or mem:// one would be each pod's own), with the keys to it; an
// endpoint inside the cluster is a rendered Service on that port.
func (r *rendered) checkWarehouse(t *testing.T, name string, env map[string]string) {
	t.Helper()
	wh := env["MVQ_WAREHOUSE"]
	u, err := url.Parse(wh)
	if err != nil || (u.Scheme != "s3" && u.Scheme != "gs") || u.Host == "" {
		t.Errorf("%s: MVQ_WAREHOUSE %q is not an object store every pod shares (%v)", name, wh, err)
		return
	}
	if u.Scheme == "s3" && (env["AWS_ACCESS_KEY_ID"] == "" || env["AWS_SECRET_ACCESS_KEY"] == "") {
		t.Errorf("%s: an s3:// warehouse without AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", name)
	}
	ep := u.Query().Get("endpoint")
	if ep == "" {
		return
	}
	e, err := url.Parse(ep)
	if err != nil || e.Port() == "" {
		t.Errorf("%s: MVQ_WAREHOUSE endpoint %q: want scheme://host:port (%v)", name, ep, err)
		return
	}
	if u.Query().Get("use_path_style") != "true" {
		t.Errorf("%s: MVQ_WAREHOUSE %q: a self-hosted endpoint wants use_path_style=true", name, wh)
	}
	host := e.Hostname()
	if strings.Contains(host, ".") && !strings.Contains(host, ".svc") {
		return // outside the cluster
	}
	svc := strings.Split(host, ".")[0]
	if !slices.ContainsFunc(r.services, func(s *corev1.Service) bool {
		return s.Name == svc && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return fmt.Sprint(p.Port) == e.Port() })
	}) {
		t.Errorf("%s: MVQ_WAREHOUSE endpoint %s is no rendered Service port", name, ep)
	}
}

// secretRefs is a container's variables set from Secrets, as secret/key.
func secretRefs(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			out[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return out
}

// checkSeaweedFS: the base's S3 server accepts the keys mvq signs with
// (both from the same Secret keys), keeps its data on a volume, and its
// Job creates the warehouse's bucket through a rendered Service.
func (r *rendered) checkSeaweedFS(t *testing.T) {
	t.Helper()
	var sw *appsv1.StatefulSet
	for _, s := range r.statefulsets {
		if s.Name == "mvq-seaweedfs" {
			sw = s
		}
	}
	if sw == nil || len(sw.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("the base has no SeaweedFS StatefulSet with one container")
	}
	c := sw.Spec.Template.Spec.Containers[0]
	r.env(t, c)
	cmd := strings.Join(append(c.Command, c.Args...), " ")
	for _, d := range r.deployments {
		mine, theirs := secretRefs(d.Spec.Template.Spec.Containers[0]), secretRefs(c)
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			if mine[k] == "" || mine[k] != theirs[k] {
				t.Errorf("%s: %s from %q, SeaweedFS from %q: want one Secret key", d.Name, k, mine[k], theirs[k])
			}
			if !strings.Contains(cmd, `"$`+k+`"`) {
				t.Errorf("SeaweedFS: its S3 identity does not use %s", k)
			}
		}
	}
	if !strings.Contains(cmd, "-s3 ") || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == "/data" && strings.Contains(cmd, "-dir=/data")
	}) {
		t.Errorf("SeaweedFS: want S3 on and -dir=/data on its volume: %s", cmd)
	}
	wh, err := url.Parse(r.configMaps["mvq-config"].Data["MVQ_WAREHOUSE"])
	if err != nil {
		t.Fatal(err)
	}
	if len(r.jobs) != 1 || len(r.jobs[0].Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one Job creating the bucket, got %d", len(r.jobs))
	}
	job := strings.Join(r.jobs[0].Spec.Template.Spec.Containers[0].Command, " ")
	if !strings.Contains(job, "s3.bucket.create -name "+wh.Host+"'") {
		t.Errorf("Job %s does not create the bucket %s: %s", r.jobs[0].Name, wh.Host, job)
	}
	m := regexp.MustCompile(`-master=([a-z0-9-]+):([0-9]+)`).FindStringSubmatch(job)
	if m == nil || !slices.ContainsFunc(r.services, func(s *corev1.Service) bool {
		return s.Name == m[1] && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool {
			return fmt.Sprint(p.Port) == m[2]
		}) && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool {
			return fmt.Sprint(p.Port) == "1"+m[2] // weed shell dials the master's gRPC port, +10000
		})
	}) {
		t.Errorf("Job %s: -master is not a rendered Service with its HTTP and gRPC ports: %s", r.jobs[0].Name, job)
	}
}

// checkMonitoring: the PrometheusRule holds exactly the rules of
// prometheus/alerts.yml (what compose's Prometheus loads), under the same
// release label as the ServiceMonitor; the dashboards ConfigMap holds
// exactly grafana/dashboards/*.json, labelled for Grafana's sidecar.
func (r *rendered) checkMonitoring(t *testing.T) {
	t.Helper()
	if len(r.rules) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(r.rules))
	}
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(b, &want); err != nil {
		t.Fatalf("prometheus/alerts.yml as a PrometheusRule spec: %v", err)
	}
	if got := r.rules[0].Spec; !reflect.DeepEqual(got, want) {
		t.Errorf("PrometheusRule %s differs from prometheus/alerts.yml:\n got %+v\nwant %+v", r.rules[0].Name, got, want)
	}
	release := r.monitors[0].Labels["release"]
	if release == "" || r.rules[0].Labels["release"] != release {
		t.Errorf("release labels: ServiceMonitor %q, PrometheusRule %q: want one, set", release, r.rules[0].Labels["release"])
	}
	files, _ := filepath.Glob("grafana/dashboards/*.json")
	var found bool
	for _, c := range r.configMaps {
		if c.Labels["grafana_dashboard"] != "1" {
			continue
		}
		found = true
		if len(c.Data) != len(files) {
			t.Errorf("ConfigMap %s: %d dashboards, want %d", c.Name, len(c.Data), len(files))
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if c.Data[filepath.Base(f)] != string(b) {
				t.Errorf("ConfigMap %s: %s differs from %s", c.Name, filepath.Base(f), f)
			}
		}
	}
	if !found {
		t.Error(`no ConfigMap labelled grafana_dashboard: "1"`)
	}
}

// checkIngress: the Ingress sends to the API's Service on a port it has,
// over TLS.
func (r *rendered) checkIngress(t *testing.T) {
	t.Helper()
	if len(r.ingresses) != 1 {
		t.Fatalf("%d Ingresses, want 1", len(r.ingresses))
	}
	in := r.ingresses[0]
	if len(in.Spec.TLS) == 0 {
		t.Errorf("Ingress %s: no TLS", in.Name)
	}
	for _, rule := range in.Spec.Rules {
		for _, p := range rule.HTTP.Paths {
			b := p.Backend.Service
			if b == nil || b.Name != "mvq-api" || !slices.ContainsFunc(r.services, func(s *corev1.Service) bool {
				return s.Name == b.Name && slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == b.Port.Name })
			}) {
				t.Errorf("Ingress %s: backend %+v is not the mvq-api Service's port", in.Name, b)
			}
		}
	}
}

// TestTraceURLTemplate: compose's API and the production overlay's link a
// job to its trace in Grafana's Explore on the provisioned Tempo
// datasource; compose's at Grafana's published address.
func TestTraceURLTemplate(t *testing.T) {
	c := loadCompose(t)
	grafana := strs(c.service(t, "grafana")["ports"])
	var prod string
	for _, d := range render(t, "k8s/overlays/production", "mvq-secrets").deployments {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "MVQ_TRACE_URL_TEMPLATE" {
				prod = e.Value
			}
		}
	}
	tempo := loadDatasources(t)["tempo"]
	for what, tmpl := range map[string]string{"compose api": env(c.service(t, "api"))["MVQ_TRACE_URL_TEMPLATE"], "production mvq-api": prod} {
		if !strings.Contains(tmpl, "{trace_id}") {
			t.Errorf("%s: MVQ_TRACE_URL_TEMPLATE %q has no {trace_id}", what, tmpl)
			continue
		}
		u, err := url.Parse(strings.ReplaceAll(tmpl, "{trace_id}", "4bf92f3577b34da6a3ce929d0e0e4736"))
		if err != nil || u.Path != "/explore" {
			t.Errorf("%s: %q is not a Grafana Explore URL (%v)", what, tmpl, err)
			continue
		}
		var panes map[string]struct {
			Queries []struct {
				Datasource struct{ Type, UID string } `json:"datasource"`
				Query      string                     `json:"query"`
			} `json:"queries"`
		}
		if err := json.Unmarshal([]byte(u.Query().Get("panes")), &panes); err != nil || len(panes) != 1 {
			t.Errorf("%s: panes of %q: %v", what, tmpl, err)
		}
		for _, p := range panes {
			if len(p.Queries) != 1 || p.Queries[0].Datasource.UID != tempo.uid || p.Queries[0].Datasource.Type != tempo.typ ||
				p.Queries[0].Query != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("%s: %q does not look up the trace id on the Tempo datasource %q", what, tmpl, tempo.uid)
			}
		}
		if what == "compose api" && !slices.Contains(grafana, u.Host+":3000") {
			t.Errorf("%s: %s is not Grafana's published address %v", what, u.Host, grafana)
		}
	}
}

// TestEnvCheckRejectsUnknownNames: the environment checks of the
// manifests and of compose fail on an MVQ_* name no binary reads, and on
// one the other binary reads.
func TestEnvCheckRejectsUnknownNames(t *testing.T) {
	if knownEnv(t)["MVQ_NOT_A_SETTING"] || roleEnv(t, "api")["MVQ_NOT_A_SETTING"] {
		t.Error("MVQ_NOT_A_SETTING passes as a setting")
	}
	if !roleEnv(t, "api")["MVQ_TRACE_URL_TEMPLATE"] || roleEnv(t, "worker")["MVQ_TRACE_URL_TEMPLATE"] {
		t.Error("MVQ_TRACE_URL_TEMPLATE: want read by the API only")
	}
	if roleEnv(t, "api")["MVQ_METRICS_LISTEN"] || roleEnv(t, "worker")["MVQ_LISTEN"] {
		t.Error("a listen address of the other binary passes")
	}
}
