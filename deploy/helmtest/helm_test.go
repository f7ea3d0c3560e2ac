// Package helmtest renders deploy/helm/oncehook with Helm's own Go library
// for a few value sets, decodes every object strictly into the Kubernetes
// API types, and parses the oncehook config it writes with oncehook's
// parser. A module of its own: Helm's and Kubernetes' dependencies never
// become oncehook's.
package helmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/oncehook/oncehook/config"
)

// rendered is what the chart made of one value set, by kind and name.
type rendered struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	claims      map[string]*corev1.PersistentVolumeClaim
	budgets     map[string]*policyv1.PodDisruptionBudget
}

func render(t *testing.T, values map[string]any) (*rendered, error) {
	t.Helper()
	ch, err := loader.Load("../helm/oncehook")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "hooks", Namespace: "default", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	r := &rendered{map[string]*appsv1.Deployment{}, map[string]*corev1.Service{}, map[string]*corev1.ConfigMap{}, map[string]*corev1.PersistentVolumeClaim{}, map[string]*policyv1.PodDisruptionBudget{}}
	for name, text := range files {
		if strings.HasSuffix(name, ".tpl") {
			continue
		}
		for _, doc := range strings.Split(text, "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			var head struct{ Kind string }
			json.Unmarshal(js, &head)
			var obj any
			switch head.Kind {
			case "Deployment":
				obj = &appsv1.Deployment{}
			case "Service":
				obj = &corev1.Service{}
			case "ConfigMap":
				obj = &corev1.ConfigMap{}
			case "PersistentVolumeClaim":
				obj = &corev1.PersistentVolumeClaim{}
			case "PodDisruptionBudget":
				obj = &policyv1.PodDisruptionBudget{}
			default:
				t.Fatalf("%s renders a %q, which this test does not know", name, head.Kind)
			}
			dec := json.NewDecoder(bytes.NewReader(js))
			dec.DisallowUnknownFields()
			if err := dec.Decode(obj); err != nil {
				t.Fatalf("%s: a %s that the Kubernetes API would not take: %v\n%s", name, head.Kind, err, doc)
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				r.deployments[o.Name] = o
			case *corev1.Service:
				r.services[o.Name] = o
			case *corev1.ConfigMap:
				r.configMaps[o.Name] = o
			case *corev1.PersistentVolumeClaim:
				r.claims[o.Name] = o
			case *policyv1.PodDisruptionBudget:
				r.budgets[o.Name] = o
			}
		}
	}
	return r, nil
}

func stripComments(doc string) string {
	var keep []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// gateway checks what every value set shares: one Deployment whose probes
// are /livez and /readyz, running as non-root; a config that oncehook
// parses with the pod's environment and nothing else (a ${NAME} the pod
// does not set is a pod that exits); an intake Service; and an API Service
// and port exactly when the config has API tokens (the gateway opens its
// API listener only then).
func gateway(t *testing.T, r *rendered) (*appsv1.Deployment, *config.Config) {
	t.Helper()
	d := r.deployments["hooks-oncehook"]
	if d == nil || len(r.deployments) != 1 {
		t.Fatalf("deployments %v", keys(r.deployments))
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.LivenessProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Fatalf("probes: liveness %s, readiness %s", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Fatal("the pod may run as root")
	}
	cm := r.configMaps["hooks-oncehook"]
	if cm == nil {
		t.Fatalf("config maps %v", keys(r.configMaps))
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = "from-the-pod-" + e.Name // as long as a token must be
	}
	if _, ok := env["ONCEHOOK_STORE"]; ok {
		env["ONCEHOOK_STORE"] = "postgres://oncehook@db:5432/oncehook"
	}
	cfg, err := config.Parse([]byte(cm.Data["oncehook.yaml"]), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("the chart's config does not parse with the pod's environment %v: %v\n%s", keys(env), err, cm.Data["oncehook.yaml"])
	}
	if r.services["hooks-oncehook-intake"] == nil {
		t.Fatalf("services %v: no intake Service", keys(r.services))
	}
	apiPort := false
	for _, p := range c.Ports {
		apiPort = apiPort || p.Name == "api"
	}
	listens := len(cfg.API.Tokens) > 0
	if api := r.services["hooks-oncehook-api"]; (api != nil) != listens || apiPort != listens {
		t.Fatalf("API tokens %d, API Service %v, API container port %v: want both exactly when the gateway listens (with tokens)",
			len(cfg.API.Tokens), api != nil, apiPort)
	}
	if listens && cfg.API.Listen != "0.0.0.0:8081" {
		t.Fatalf("api.listen %s: the API Service targets 8081 on the pod", cfg.API.Listen)
	}
	return d, cfg
}

func TestDefaultIsSQLiteOnOneReplicaWithAVolume(t *testing.T) {
	r, err := render(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, cfg := gateway(t, r)
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Fatalf("replicas %d, strategy %s: one writer, and the old pod lets go of the volume first", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	claim := r.claims["hooks-oncehook"]
	if claim == nil || claim.Spec.Resources.Requests.Storage().String() != "10Gi" {
		t.Fatalf("claims %v", keys(r.claims))
	}
	mounted := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		mounted = mounted || v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim.Name
	}
	if !mounted || cfg.Store != "sqlite:///data/oncehook.db" {
		t.Fatalf("store %s, claim mounted %v", cfg.Store, mounted)
	}
	if len(r.budgets) != 0 {
		t.Fatal("a PodDisruptionBudget for one replica would block every drain")
	}
}

func TestPostgresReplicas(t *testing.T) {
	r, err := render(t, map[string]any{
		"replicaCount": 3,
		"store":        map[string]any{"type": "postgres", "postgres": map[string]any{"existingSecret": "oncehook-db"}},
		"redisURL":     "redis://redis:6379/0",
		"secretEnv":    []any{map[string]any{"name": "STRIPE_WEBHOOK_SECRET", "secret": "providers", "key": "stripe"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	d, cfg := gateway(t, r)
	if *d.Spec.Replicas != 3 || len(r.claims) != 0 || r.budgets["hooks-oncehook"] == nil {
		t.Fatalf("replicas %d, claims %v, budgets %v", *d.Spec.Replicas, keys(r.claims), keys(r.budgets))
	}
	if !strings.HasPrefix(cfg.Store, "postgres://") || cfg.Redis != "redis://redis:6379/0" {
		t.Fatalf("store %q, redis %q", cfg.Store, cfg.Redis)
	}
	fromSecret := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			fromSecret[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	if fromSecret["ONCEHOOK_STORE"] != "oncehook-db/url" || fromSecret["STRIPE_WEBHOOK_SECRET"] != "providers/stripe" {
		t.Fatalf("environment from secrets %v", fromSecret)
	}
}

// The README's install: the default values name the one secret their config
// needs, from the Secret the README has you create, and open no API.
func TestDefaultConfigsSecretComesFromASecret(t *testing.T) {
	r, err := render(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, cfg := gateway(t, r)
	if len(cfg.API.Tokens) != 0 {
		t.Fatalf("the default config has API tokens %v", cfg.API.Tokens)
	}
	var refs []string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs = append(refs, e.Name+"="+e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"STRIPE_WEBHOOK_SECRET=oncehook-providers/stripe"} {
		if !slices.Contains(refs, want) {
			t.Fatalf("environment from secrets %v, want %s", refs, want)
		}
	}
	if !strings.Contains(string(readme), "kubectl create secret generic oncehook-providers --from-literal=stripe=") {
		t.Fatal("the README does not say how to create the Secret the default install reads")
	}
}

// API tokens in the values' config join the chart's api.listen: one api,
// whose Service exists; the config may also be given as a map.
func TestAPITokensJoinTheChartsListen(t *testing.T) {
	token := map[string]any{"name": "ops", "token": "${ONCEHOOK_API_TOKEN}", "read_only": true}
	apiEnv := map[string]any{"name": "ONCEHOOK_API_TOKEN", "secret": "oncehook-api", "key": "token"}
	stripeEnv := map[string]any{"name": "STRIPE_WEBHOOK_SECRET", "secret": "providers", "key": "stripe"}
	for name, cfg := range map[string]any{
		"text": "api:\n  tokens:\n    - {name: ops, token: \"${ONCEHOOK_API_TOKEN}\", read_only: true}\n" +
			"sources:\n  - {name: stripe, preset: stripe, secrets: [\"${STRIPE_WEBHOOK_SECRET}\"], destinations: [app]}\n" +
			"destinations:\n  - {name: app, url: \"http://app/hooks\", retry: {max_attempts: 100000}}\n",
		"map": map[string]any{
			"api":          map[string]any{"tokens": []any{token}},
			"sources":      []any{map[string]any{"name": "stripe", "preset": "stripe", "secrets": []any{"${STRIPE_WEBHOOK_SECRET}"}, "destinations": []any{"app"}}},
			"destinations": []any{map[string]any{"name": "app", "url": "http://app/hooks", "retry": map[string]any{"max_attempts": 100000}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := render(t, map[string]any{"config": cfg, "secretEnv": []any{apiEnv, stripeEnv}})
			if err != nil {
				t.Fatal(err)
			}
			_, c := gateway(t, r)
			if len(c.API.Tokens) != 1 || c.API.Tokens[0].Name != "ops" || !c.API.Tokens[0].ReadOnly || c.API.Tokens[0].Token != "from-the-pod-ONCEHOOK_API_TOKEN" {
				t.Fatalf("api tokens %+v", c.API.Tokens)
			}
			if len(c.Destinations) != 1 || c.Destinations[0].Retry.MaxAttempts != 100000 {
				t.Fatalf("destinations %+v: a number in the values' config changed on its way through", c.Destinations)
			}
		})
	}
}

func TestChartRefusesWhatCannotWork(t *testing.T) {
	for values, want := range map[string]string{
		`{"replicaCount": 2}`:             "one replica",
		`{"store": {"type": "postgres"}}`: "existingSecret",
		`{"store": {"type": "mysql"}}`:    "want sqlite or postgres",
		`{"secretEnv": []}`:               "config names ${STRIPE_WEBHOOK_SECRET}, which no secretEnv entry sets",
		`{"config": "api: {tokens: [{name: ops, token: \"${OPS_TOKEN}\"}]}"}`: "config names ${OPS_TOKEN}",
		`{"config": "listen: 0.0.0.0:9000"}`:                                  "config sets listen",
		`{"config": "store: sqlite://x.db"}`:                                  "config sets store",
		`{"config": "api: {listen: 0.0.0.0:9001}"}`:                           "config sets api.listen",
		`{"config": "sources: [a"}`:                                           "config: not a YAML mapping",
	} {
		var v map[string]any
		if err := json.Unmarshal([]byte(values), &v); err != nil {
			t.Fatal(err)
		}
		_, err := render(t, v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", values, err, want)
		}
	}
}

func keys[V any](m map[string]V) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return fmt.Sprint(out)
}
