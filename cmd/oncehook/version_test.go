package main

import (
	"bytes"
	"context"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/store/sqlite"
)

// What `oncehook version` says for each way a binary is made: the release
// build's stamps win; otherwise what Go recorded names the release and the
// commit (go build in a checkout, go install of a tag or of an untagged
// commit), and a binary that knows neither says so rather than inventing one.
func TestVersionNamesTheReleaseAndItsCommit(t *testing.T) {
	const rev = "4f2c9e1d0a12b3c4d5e6f708192a3b4c5d6e7f80"
	driver := []*debug.Module{{Path: "modernc.org/sqlite", Version: "v1.62.0"}}
	checkout := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201100203-4f2c9e1d0a12+dirty"}, Deps: driver,
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-12-01T10:02:03Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		name                  string
		stamps                stamps
		bi                    *debug.BuildInfo
		release, commit, date string
		driver                string
	}{
		{"the release build", stamps{"v1.2.3", rev, "2026-12-01T10:02:03Z"}, checkout, "v1.2.3", rev, "2026-12-01T10:02:03Z", "modernc.org/sqlite v1.62.0"},
		{"go build in a checkout with changes", stamps{}, checkout, "v0.0.0-20261201100203-4f2c9e1d0a12+dirty", rev + "-dirty", "2026-12-01T10:02:03Z", "modernc.org/sqlite v1.62.0"},
		{"go install of a tag", stamps{}, &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Deps: driver}, "v1.2.3", "", "", "modernc.org/sqlite v1.62.0"},
		{"go install of an untagged commit", stamps{}, &debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20261201100203-4f2c9e1d0a12"}, Deps: driver}, "v1.2.4-0.20261201100203-4f2c9e1d0a12", "4f2c9e1d0a12", "", "modernc.org/sqlite v1.62.0"},
		{"a replaced driver", stamps{}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Deps: []*debug.Module{{Path: "modernc.org/sqlite", Version: "v1.62.0", Replace: &debug.Module{Path: "example.com/fork/sqlite", Version: "v1.62.1"}}}}, "(devel)", "", "", "example.com/fork/sqlite v1.62.1"},
		{"no build information", stamps{}, nil, "(devel)", "", "", "modernc.org/sqlite"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := describeBuild(c.stamps, c.bi)
			if d.Release != c.release || d.Commit != c.commit || d.Date != c.date || d.Driver != c.driver {
				t.Fatalf("got %+v\nwant release %q, commit %q, date %q, driver %q", d, c.release, c.commit, c.date, c.driver)
			}
			var out bytes.Buffer
			writeVersion(&out, d)
			text := out.String()
			if !strings.HasPrefix(text, "oncehook "+c.release+"\n") {
				t.Errorf("the first line is not %q:\n%s", "oncehook "+c.release, text)
			}
			for _, want := range []string{
				"go      " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n",
				"sqlite  " + c.driver + " (SQLite " + sqlite.Library + ", pure Go: no cgo)\n",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("no %q in\n%s", want, text)
				}
			}
			commitLine, dateLine := "commit  "+c.commit+"\n", "built   "+c.date+"\n"
			if c.commit == "" {
				commitLine = "commit  unknown ("
			}
			if c.date == "" {
				dateLine = "built   unknown ("
			}
			if !strings.Contains(text, commitLine) || !strings.Contains(text, dateLine) {
				t.Errorf("want %q and %q in\n%s", commitLine, dateLine, text)
			}
		})
	}
}

func TestVersionCommandAndFlag(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		if !strings.HasPrefix(stdout.String(), "oncehook ") || !strings.Contains(stdout.String(), "\n  sqlite  modernc.org/sqlite v") {
			t.Errorf("%v printed\n%s", args, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"version", "extra"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), `version takes no argument (got "extra")`) {
		t.Errorf("version extra: %v", err)
	}
}
