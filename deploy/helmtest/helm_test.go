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
// are /livez and /readyz, running as non-root, two Services, and a config
// that oncehook parses (the ${...} it names set as the pod's environment
// would set them).
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
	if r.services["hooks-oncehook-intake"] == nil || r.services["hooks-oncehook-api"] == nil {
		t.Fatalf("services %v: want one for intake and one for the API", keys(r.services))
	}
	cm := r.configMaps["hooks-oncehook"]
	if cm == nil {
		t.Fatalf("config maps %v", keys(r.configMaps))
	}
	env := map[string]string{"ONCEHOOK_STORE": "postgres://oncehook@db:5432/oncehook", "STRIPE_WEBHOOK_SECRET": "whsec_helm"}
	cfg, err := config.Parse([]byte(cm.Data["oncehook.yaml"]), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("the chart's config does not parse: %v\n%s", err, cm.Data["oncehook.yaml"])
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

func TestChartRefusesWhatCannotWork(t *testing.T) {
	for values, want := range map[string]string{
		`{"replicaCount": 2}`:             "one replica",
		`{"store": {"type": "postgres"}}`: "existingSecret",
		`{"store": {"type": "mysql"}}`:    "want sqlite or postgres",
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
