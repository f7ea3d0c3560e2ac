package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"

	"github.com/oncehook/oncehook/store/sqlite"
)

// The release build (go run ./internal/release) stamps these with
//
//	-ldflags "-X main.version=v1.2.3 -X main.commit=<revision> -X main.date=<RFC 3339>"
//
// A build without them (go build in a checkout, go install) says what the
// Go toolchain recorded instead; see describeBuild.
var (
	version = ""
	commit  = ""
	date    = ""
)

// stamps are the -X values a build was given ("" where none was).
type stamps struct{ version, commit, date string }

// buildDescription is what `oncehook version` says about the binary.
type buildDescription struct {
	Release  string // v1.2.3, a pseudo-version (go install, go build), or (devel)
	Commit   string // the full revision, with -dirty when built from a modified tree; "" when unknown
	Date     string // the source's date: the commit's time (RFC 3339); "" when unknown
	Go       string // go1.26.8
	Platform string // linux/amd64
	Driver   string // the SQLite driver's module and version
}

func versionCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: oncehook version\n\nPrints the release, the commit it was built from, the build's date, the Go version and the SQLite driver.")
	}
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	writeVersion(stdout, describeBuild(stamps{version, commit, date}, bi))
	return nil
}

// describeBuild prefers the release build's stamps, and falls back on the
// build information Go records in every binary: the module's version (a
// tag for go install ...@v1.2.3, a pseudo-version naming the commit for
// an untagged one or for go build in a checkout) and, for a build in a
// checkout, the revision and its time. bi may be nil.
func describeBuild(s stamps, bi *debug.BuildInfo) buildDescription {
	d := buildDescription{Release: s.version, Commit: s.commit, Date: s.date,
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Driver: sqlite.Driver}
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	if d.Release == "" {
		d.Release = bi.Main.Version
	}
	if d.Release == "" {
		d.Release = "(devel)"
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	if d.Commit == "" && vcs["vcs.revision"] != "" {
		d.Commit = vcs["vcs.revision"]
		if vcs["vcs.modified"] == "true" {
			d.Commit += "-dirty"
		}
	}
	if d.Commit == "" {
		// go install of an untagged commit: the pseudo-version names it.
		if m := pseudoRevision.FindStringSubmatch(bi.Main.Version); m != nil {
			d.Commit = m[1]
		}
	}
	if d.Date == "" {
		d.Date = vcs["vcs.time"]
	}
	for _, dep := range bi.Deps {
		if dep.Path != sqlite.Driver {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		d.Driver = dep.Path + " " + dep.Version
	}
	return d
}

// pseudoRevision reads the commit prefix at the end of a pseudo-version
// (v0.0.0-20261201100203-4f2c9e1d0a12, v1.2.4-0.20261201100203-4f2c9e1d0a12+dirty).
var pseudoRevision = regexp.MustCompile(`[-.]\d{14}-([0-9a-f]{12})(\+.*)?$`)

func writeVersion(w io.Writer, d buildDescription) {
	unknown := func(s, why string) string {
		if s == "" {
			return "unknown (" + why + ")"
		}
		return s
	}
	fmt.Fprintf(w, "oncehook %s\n", d.Release)
	fmt.Fprintf(w, "  commit  %s\n", unknown(d.Commit, "not built by the release build or in a checkout"))
	fmt.Fprintf(w, "  built   %s\n", unknown(d.Date, "no commit to date it by"))
	fmt.Fprintf(w, "  go      %s %s\n", d.Go, d.Platform)
	fmt.Fprintf(w, "  sqlite  %s (SQLite %s, pure Go: no cgo)\n", d.Driver, sqlite.Library)
}
