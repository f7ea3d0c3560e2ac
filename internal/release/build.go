package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Target is one platform a release ships a binary for.
type Target struct{ OS, Arch string }

// targets are the platforms every release ships: Linux, macOS and Windows,
// each on amd64 and arm64.
var targets = []Target{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

func hostTarget() Target { return Target{runtime.GOOS, runtime.GOARCH} }

// parseTargets reads -targets: "all" (every release target), or a
// comma-separated list of os/arch among them, where "host" is this
// platform. A snapshot may build a few, so that CI builds in minutes what
// the release workflow builds in full: this platform's (run by check) and
// one that takes the other side of every build constraint (windows/amd64:
// !unix) are enough to catch a file that does not compile there.
func parseTargets(list string) ([]Target, error) {
	if list == "" || list == "all" {
		return targets, nil
	}
	var out []Target
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		t := hostTarget()
		if name != "host" {
			os, arch, ok := strings.Cut(name, "/")
			if t = (Target{os, arch}); !ok || !slices.Contains(targets, t) {
				return nil, fmt.Errorf("-targets: %q is not a release target (%v, host or all)", name, targets)
			}
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (t Target) String() string { return t.OS + "/" + t.Arch }

// binaryName is the executable's name in the target's archive.
func (t Target) binaryName() string {
	if t.OS == "windows" {
		return "oncehook.exe"
	}
	return "oncehook"
}

// archiveName is the target's download: oncehook_1.2.3_linux_amd64.tar.gz
// (the version without its v, as release downloads are usually named), a
// .zip for Windows, where tar is not at hand.
func (t Target) archiveName(version string) string {
	ext := ".tar.gz"
	if t.OS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("oncehook_%s_%s_%s%s", strings.TrimPrefix(version, "v"), t.OS, t.Arch, ext)
}

func checksumsName(version string) string {
	return fmt.Sprintf("oncehook_%s_checksums.txt", strings.TrimPrefix(version, "v"))
}

// goBuild is the one way a release binary is built. The environment is
// set, not inherited, wherever it would change the bytes: cgo off (a
// static binary; modernc's SQLite needs none), the architectures' baseline
// levels, and no GOFLAGS. -trimpath keeps the builder's paths out, and
// -buildvcs=false leaves the stamps the only record of the commit, so a
// binary built in the image (which has no .git) is the same as the
// archive's. -s -w drop the symbol table and DWARF: a third of the size.
func goBuild(ctx context.Context, t Target, s Stamps, out string) error {
	ldflags := "-s -w"
	for _, x := range []struct{ name, value string }{{"version", s.Version}, {"commit", s.Commit}, {"date", s.Date}} {
		if strings.ContainsAny(x.value, " \t\n'\"") {
			return fmt.Errorf("the %s stamp %q holds a space or a quote", x.name, x.value)
		}
		if x.value != "" {
			ldflags += " -X main." + x.name + "=" + x.value
		}
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./cmd/oncehook")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch, "GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w", t, err)
	}
	return nil
}

// build writes every target's archive and the checksums into out, after
// removing an earlier build's there: what is there after a build is that
// build's, and nothing else is published. A folder holding anything else
// is refused, not emptied.
func build(ctx context.Context, s Stamps, only []Target, out string, log io.Writer) error {
	if err := clearOut(out); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "oncehook-release")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	mtime, err := time.Parse(time.RFC3339, s.Date)
	if err != nil {
		return fmt.Errorf("the date stamp: %w", err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "release %s, commit %s, dated %s\n", s.Version, s.Commit, s.Date)
	var sums []string
	for _, t := range only {
		start := time.Now()
		bin := filepath.Join(work, t.OS+"_"+t.Arch, t.binaryName())
		if err := goBuild(ctx, t, s, bin); err != nil {
			return err
		}
		exe, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		name := t.archiveName(s.Version)
		files := []archiveFile{{t.binaryName(), 0o755, exe}, {"README.md", 0o644, readme}}
		if err := writeArchive(filepath.Join(out, name), files, mtime); err != nil {
			return err
		}
		sum, err := fileSHA256(filepath.Join(out, name))
		if err != nil {
			return err
		}
		sums = append(sums, sum+"  "+name+"\n")
		fmt.Fprintf(log, "  %-14s %s (%.1f MiB binary, %.1fs)\n", t, name, float64(len(exe))/(1<<20), time.Since(start).Seconds())
	}
	slices.Sort(sums)
	return os.WriteFile(filepath.Join(out, checksumsName(s.Version)), []byte(strings.Join(sums, "")), 0o644)
}

func clearOut(out string) error {
	entries, err := os.ReadDir(out)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(out, 0o755)
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "oncehook_") {
			return fmt.Errorf("-out %s holds %s, which no build wrote: give an empty or new folder", out, e.Name())
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(out, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
