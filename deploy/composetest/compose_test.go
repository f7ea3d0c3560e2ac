// Package composetest loads deploy/compose's files with the Compose
// specification's own loader, strictly, as docker compose would, and the
// oncehook configs they mount with oncehook's. A module of its own, so
// that compose-go's dependencies never become oncehook's.
package composetest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/oncehook/oncehook/config"
)

var env = []string{
	"STRIPE_WEBHOOK_SECRET=whsec_compose_test",
	"ONCEHOOK_API_TOKEN=compose-test-token-0123456789",
	"POSTGRES_PASSWORD=compose-test-password",
}

func load(t *testing.T, file string, env []string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join("..", "compose", file)},
		cli.WithEnv(env), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// mounted parses the oncehook config a service mounts at target, with the
// service's environment, as the gateway in the container would.
func mounted(t *testing.T, svc types.ServiceConfig, target string) *config.Config {
	t.Helper()
	for _, v := range svc.Volumes {
		if v.Target != target {
			continue
		}
		if v.Type != types.VolumeTypeBind || !v.ReadOnly {
			t.Fatalf("%s: %s is mounted %s (read-only %v): want a read-only file", svc.Name, target, v.Type, v.ReadOnly)
		}
		text, err := os.ReadFile(v.Source)
		if err != nil {
			t.Fatalf("%s mounts %s: %v", svc.Name, v.Source, err)
		}
		cfg, err := config.Parse(text, func(k string) (string, bool) {
			val, ok := svc.Environment[k]
			if !ok || val == nil {
				return "", false
			}
			return *val, true
		})
		if err != nil {
			t.Fatalf("%s: the config it mounts does not parse: %v", svc.Name, err)
		}
		if !strings.HasPrefix(cfg.Listen, "0.0.0.0:") {
			t.Fatalf("%s: listen %s: in a container it must listen on 0.0.0.0", svc.Name, cfg.Listen)
		}
		reachable(t, svc, cfg)
		return cfg
	}
	t.Fatalf("%s mounts nothing at %s", svc.Name, target)
	return nil
}

// reachable checks what a gateway's ports and names promise: intake
// published; the API listener (the admin API, the effects ledger, the
// dashboard) published on the host's loopback only, as the README says;
// and a destination on host.docker.internal resolvable on Linux too, where
// only extra_hosts' host-gateway makes that name.
func reachable(t *testing.T, svc types.ServiceConfig, cfg *config.Config) {
	t.Helper()
	_, apiPort, err := net.SplitHostPort(cfg.API.Listen)
	if err != nil {
		t.Fatal(err)
	}
	_, intakePort, _ := net.SplitHostPort(cfg.Listen)
	var intake, api bool
	for _, p := range svc.Ports {
		switch fmt.Sprint(p.Target) {
		case intakePort:
			intake = true
		case apiPort:
			api = true
			if p.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes the API (%d) on %q: want the host's loopback only, 127.0.0.1", svc.Name, p.Target, p.HostIP)
			}
		}
	}
	if !intake || len(cfg.API.Tokens) > 0 && !api {
		t.Errorf("%s: intake published %v, API published %v", svc.Name, intake, api)
	}
	for _, d := range cfg.Destinations {
		u, err := url.Parse(d.URL)
		if err != nil {
			t.Fatal(err)
		}
		if u.Hostname() == "host.docker.internal" && !slices.Contains(svc.ExtraHosts["host.docker.internal"], "host-gateway") {
			t.Errorf("%s: destination %s is on host.docker.internal, which Linux's Docker resolves only with extra_hosts host-gateway (has %v)",
				svc.Name, d.Name, svc.ExtraHosts)
		}
	}
}

func TestEmbeddedComposeFile(t *testing.T) {
	p, err := load(t, "compose.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Services) != 1 || len(p.Volumes) != 1 {
		t.Fatalf("%d services and %d volumes: want one of each", len(p.Services), len(p.Volumes))
	}
	svc, err := p.GetService("oncehook")
	if err != nil {
		t.Fatal(err)
	}
	if svc.Build == nil {
		t.Fatal("the service builds no image")
	}
	if _, err := os.Stat(filepath.Join(svc.Build.Context, "Dockerfile")); err != nil {
		t.Fatalf("the build context %s has no Dockerfile: %v", svc.Build.Context, err)
	}
	data := false
	for _, v := range svc.Volumes {
		data = data || v.Type == types.VolumeTypeVolume && v.Target == "/data"
	}
	if !data {
		t.Fatal("no named volume at /data, where the SQLite file lives")
	}
	cfg := mounted(t, svc, "/data/oncehook.yaml")
	// A relative path is in the working directory, /data, the volume.
	if file, ok := strings.CutPrefix(cfg.Store, "sqlite://"); !ok || strings.HasPrefix(file, "/") && !strings.HasPrefix(file, "/data/") {
		t.Fatalf("store %s: want a SQLite file in /data", cfg.Store)
	}
	if _, err := load(t, "compose.yaml", env[1:]); err == nil || !strings.Contains(err.Error(), "STRIPE_WEBHOOK_SECRET") {
		t.Fatalf("without the secret: %v, want an error naming it", err)
	}
}

func TestReplicasComposeFile(t *testing.T) {
	p, err := load(t, "replicas.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[uint32]string{}
	for _, name := range []string{"oncehook-1", "oncehook-2"} {
		svc, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, dep := range []string{"postgres", "redis"} {
			if d, ok := svc.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s starts before %s is healthy", name, dep)
			}
		}
		for _, port := range svc.Ports {
			published := port.Published
			if other, ok := ports[portNumber(t, published)]; ok {
				t.Fatalf("%s and %s both publish %s", other, name, published)
			}
			ports[portNumber(t, published)] = name
		}
		cfg := mounted(t, svc, "/etc/oncehook/oncehook.yaml")
		if !strings.HasPrefix(cfg.Store, "postgres://") || !strings.Contains(cfg.Store, "@postgres:5432/") || cfg.Redis == "" {
			t.Fatalf("%s: store %q, redis %q: want the compose file's PostgreSQL and Redis", name, cfg.Store, cfg.Redis)
		}
	}
	for _, name := range []string{"postgres", "redis"} {
		svc, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		if svc.HealthCheck == nil || len(svc.HealthCheck.Test) == 0 {
			t.Errorf("%s has no health check for the gateways to wait on", name)
		}
	}
}

func portNumber(t *testing.T, s string) uint32 {
	t.Helper()
	var n uint32
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("published port %q", s)
		}
		n = n*10 + uint32(c-'0')
	}
	return n
}
