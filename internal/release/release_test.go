package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The same files give the same archive bytes (so a rebuilt tag has the
// published checksums), and a user's own tools extract an executable
// binary from them.
func TestArchivesAreReproducibleAndExtractWithTheUsersTools(t *testing.T) {
	mtime := time.Date(2026, 12, 1, 10, 2, 3, 0, time.UTC)
	files := []archiveFile{{"oncehook", 0o755, []byte("#!/bin/sh\necho hello\n")}, {"README.md", 0o644, []byte("# oncehook\n")}}
	for _, name := range []string{"oncehook_1.2.3_linux_amd64.tar.gz", "oncehook_1.2.3_windows_arm64.zip"} {
		a, b := filepath.Join(t.TempDir(), name), filepath.Join(t.TempDir(), name)
		if err := writeArchive(a, files, mtime); err != nil {
			t.Fatal(err)
		}
		if err := writeArchive(b, files, mtime.Add(0)); err != nil {
			t.Fatal(err)
		}
		ab, _ := os.ReadFile(a)
		bb, _ := os.ReadFile(b)
		if !bytes.Equal(ab, bb) {
			t.Errorf("%s: two archives of the same files differ", name)
		}
		got, err := readArchive(a)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || string(got["oncehook"]) != string(files[0].data) || string(got["README.md"]) != string(files[1].data) {
			t.Errorf("%s holds %q", name, got)
		}
	}

	// tar, as the README has a user run it, keeps the executable bit and
	// the commit's time.
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar here")
	}
	dir := t.TempDir()
	tgz := filepath.Join(dir, "oncehook_1.2.3_linux_amd64.tar.gz")
	if err := writeArchive(tgz, files, mtime); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-xzf", tgz, "-C", dir, "oncehook").CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf: %v\n%s", err, out)
	}
	fi, err := os.Stat(filepath.Join(dir, "oncehook"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o111 == 0 || !fi.ModTime().Equal(mtime) {
		t.Errorf("extracted as %v, dated %v", fi.Mode(), fi.ModTime())
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err == nil {
		t.Error("tar -xzf ... oncehook extracted more than the binary")
	}
}

// check trusts nothing the checksums file does not vouch for, in the
// format sha256sum --check reads (the README's verification).
func TestChecksumsVouchForEveryFileAndNothingElse(t *testing.T) {
	dist := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dist, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.tar.gz", "first")
	write("b.zip", "second")
	sumA, _ := fileSHA256(filepath.Join(dist, "a.tar.gz"))
	sumB, _ := fileSHA256(filepath.Join(dist, "b.zip"))
	good := sumA + "  a.tar.gz\n" + sumB + "  b.zip\n"
	write("sums.txt", good)
	if sums, err := verifyChecksums(dist, "sums.txt"); err != nil || len(sums) != 2 {
		t.Fatalf("good checksums: %v %v", sums, err)
	}
	if sha, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(sha, "--check", "--strict", "sums.txt")
		cmd.Dir = dist
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum --check disagrees: %v\n%s", err, out)
		}
	}

	for _, c := range []struct {
		name, sums, extra, tamper string
		want                      string
	}{
		{"a file changed after", good, "", "b.zip", "b.zip: SHA-256"},
		{"a file not vouched for", good, "c.txt", "", "c.txt is not in sums.txt"},
		{"a file missing", good + strings.Repeat("0", 64) + "  gone.zip\n", "", "", "gone.zip"},
		{"named twice", good + sumA + "  a.tar.gz\n", "", "", "named twice"},
		{"not a checksum", "zz  a.tar.gz\n" + sumB + "  b.zip\n", "", "", "is not a SHA-256"},
		{"a path", sumA + "  ../a.tar.gz\n", "", "", "is not a SHA-256 and a file name"},
		{"one space", sumA + " a.tar.gz\n" + sumB + "  b.zip\n", "", "", "is not a SHA-256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"a.tar.gz", "b.zip"} {
				b, _ := os.ReadFile(filepath.Join(dist, f))
				if f == c.tamper {
					b = append(b, '!')
				}
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
			}
			if c.extra != "" {
				os.WriteFile(filepath.Join(dir, c.extra), []byte("x"), 0o644)
			}
			os.WriteFile(filepath.Join(dir, "sums.txt"), []byte(c.sums), 0o644)
			_, err := verifyChecksums(dir, "sums.txt")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// A binary is checked against the platform its archive names, from its
// own headers and build information: this test's own binary (linux/amd64
// or whatever runs it) is no other platform's, and is not oncehook.
func TestInspectBinaryRefusesTheWrongPlatformOrProgram(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	host := hostTarget()
	for _, target := range targets {
		err := inspectBinary(target, exe)
		switch {
		case err == nil:
			t.Errorf("%s: the test binary passed", target)
		case target == host && !strings.Contains(err.Error(), "not of cmd/oncehook") && !strings.Contains(err.Error(), "dynamic loader"):
			t.Errorf("%s: %v, want it refused as another program, or as not static", target, err)
		case target != host && !strings.Contains(err.Error(), "an executable for") && !strings.Contains(err.Error(), "not a"):
			t.Errorf("%s: %v, want it refused as another platform's", target, err)
		}
	}
}

// A release is the tag's code and nothing else; a snapshot says what it
// was built from.
func TestStampsNameTheTagAndTheCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	t.Chdir(repo)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	sh := func(args ...string) string {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_COMMITTER_DATE=2026-12-01T10:02:03Z", "GIT_AUTHOR_DATE=2026-12-01T10:02:03Z")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sh("git", "init", "-q")
	os.WriteFile("README.md", []byte("one\n"), 0o644)
	sh("git", "add", "README.md")
	sh("git", "commit", "-q", "-m", "one")
	head := sh("git", "rev-parse", "HEAD")
	ctx := context.Background()

	s, err := stampRequest{snapshot: true}.resolve(ctx)
	if err != nil || s.Version != "v0.0.0-snapshot-"+head[:12] || s.Commit != head || s.Date != "2026-12-01T10:02:03Z" {
		t.Errorf("a snapshot before any tag: %+v %v", s, err)
	}
	if _, err := (stampRequest{version: "v1.2.3"}).resolve(ctx); err == nil || !strings.Contains(err.Error(), "does not carry the tag v1.2.3") {
		t.Errorf("a release of an untagged HEAD: %v", err)
	}
	sh("git", "tag", "v1.2.3")
	s, err = stampRequest{version: "v1.2.3"}.resolve(ctx)
	if err != nil || s != (Stamps{"v1.2.3", head, "2026-12-01T10:02:03Z"}) {
		t.Errorf("a release of its tag: %+v %v", s, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1767225600")
	if s, _ := (stampRequest{version: "v1.2.3"}).resolve(ctx); s.Date != "2026-01-01T00:00:00Z" {
		t.Errorf("SOURCE_DATE_EPOCH: dated %s", s.Date)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	os.WriteFile("README.md", []byte("two\n"), 0o644)
	if _, err := (stampRequest{version: "v1.2.3"}).resolve(ctx); err == nil || !strings.Contains(err.Error(), "uncommitted changes") {
		t.Errorf("a release of a modified tree: %v", err)
	}
	s, err = stampRequest{snapshot: true}.resolve(ctx)
	if err != nil || s.Version != "v1.2.3-snapshot-"+head[:12] || s.Commit != head+"-dirty" {
		t.Errorf("a snapshot of a modified tree after v1.2.3: %+v %v", s, err)
	}
	for _, bad := range []stampRequest{{}, {version: "v1.2.3", snapshot: true}, {version: "1.2.3"}, {version: "v1.2"}, {version: "v01.2.3"}, {version: "v1.2.3 -X main.commit=x"}} {
		if _, err := bad.resolve(ctx); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
	if !semver.MatchString("v1.2.3-rc.1") {
		t.Error("a pre-release tag is refused")
	}
}

// build clears an earlier build's output, and refuses a folder holding
// anything else (-out . in a checkout) rather than emptying it.
func TestBuildClearsOnlyItsOwnOutput(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"oncehook_0.0.1_linux_amd64.tar.gz", "oncehook_0.0.1_checksums.txt"} {
		os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644)
	}
	if err := clearOut(dir); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("an earlier build's files stayed: %v", left)
	}
	os.WriteFile(filepath.Join(dir, "oncehook_0.0.1_checksums.txt"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644)
	if err := clearOut(dir); err == nil || !strings.Contains(err.Error(), "holds go.mod") {
		t.Fatalf("a folder with go.mod: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 2 {
		t.Fatalf("a refused folder was changed: %v", left)
	}
	if err := clearOut(filepath.Join(dir, "new", "dist")); err != nil {
		t.Fatalf("a new folder: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "new", "dist")); err != nil || !fi.IsDir() {
		t.Fatalf("the new folder was not made: %v", err)
	}
}

// The README's download commands fetch the names build writes, for every
// platform its OS and ARCH may name.
func TestTheREADMEsDownloadsAreTheBuildsNames(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	install := text[strings.Index(text, "## Install"):strings.Index(text, "## Quick start")]
	var urls []string
	for _, line := range strings.Split(install, "\n") {
		if strings.HasPrefix(line, "curl -fLO ") {
			urls = append(urls, strings.Trim(strings.TrimPrefix(line, "curl -fLO "), `"`))
		}
	}
	if len(urls) != 2 {
		t.Fatalf("want two curl lines in the README's Install, found %q", urls)
	}
	for _, target := range targets {
		if target.OS == "windows" {
			if !strings.Contains(install, target.archiveName("v1.2.3")) && target.Arch == "amd64" {
				t.Errorf("the README's Windows example does not name %s", target.archiveName("v1.2.3"))
			}
			continue
		}
		expand := strings.NewReplacer("$V", "1.2.3", "${V}", "1.2.3", "${OS}", target.OS, "${ARCH}", target.Arch)
		want := []string{
			"https://github.com/oncehook/oncehook/releases/download/v1.2.3/" + target.archiveName("v1.2.3"),
			"https://github.com/oncehook/oncehook/releases/download/v1.2.3/" + checksumsName("v1.2.3"),
		}
		for i, u := range urls {
			if got := expand.Replace(u); got != want[i] {
				t.Errorf("%s: the README downloads %s; the release names it %s", target, got, want[i])
			}
		}
		if !strings.Contains(install, "`"+target.OS+"`") || !strings.Contains(install, "`"+target.Arch+"`") {
			t.Errorf("the README does not say OS %s or ARCH %s", target.OS, target.Arch)
		}
	}
}

// -targets: a snapshot may build a few of the release's platforms, named
// as os/arch or host; a tag's release builds them all, and a name that is
// not a release platform is refused, naming the ones that are.
func TestTargetsChooseASnapshotsPlatforms(t *testing.T) {
	for _, c := range []struct {
		list string
		want []Target
		err  string
	}{
		{"all", targets, ""},
		{"", targets, ""},
		{"host", []Target{hostTarget()}, ""},
		{"host, windows/amd64,host", []Target{hostTarget(), {"windows", "amd64"}}, ""},
		{"plan9/amd64", nil, `"plan9/amd64" is not a release target`},
		{"linux", nil, `"linux" is not a release target`},
	} {
		got, err := parseTargets(c.list)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %v, %v; want an error saying %s", c.list, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: got %v, %v; want %v", c.list, got, err, c.want)
		}
	}
	var stderr strings.Builder
	err := run(context.Background(), []string{"build", "-version", "v1.2.3", "-targets", "host", "-out", t.TempDir()}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "only a -snapshot builds fewer") {
		t.Errorf("a release of one target: got %v, want it refused", err)
	}
}
