package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Stamps are what a binary says of itself in `oncehook version`, set with
// -ldflags -X on cmd/oncehook's version, commit and date.
type Stamps struct {
	Version string // v1.2.3, or v1.2.3-snapshot-<commit> for a snapshot
	Commit  string // the full revision; -dirty when the tree had changes
	Date    string // the commit's time (or SOURCE_DATE_EPOCH), RFC 3339, UTC
}

// semver is a release tag: vMAJOR.MINOR.PATCH with an optional
// pre-release, as Go modules version them.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// stampRequest is build's and stamps' choice: a release (-version) or a
// snapshot (-snapshot), exactly one.
type stampRequest struct {
	version  string
	snapshot bool
}

// resolve reads the checkout for the stamps. A release needs a clean tree
// whose HEAD carries the tag: an artifact named v1.2.3 is the tag's code
// and nothing else. A snapshot is named after the last tag (v0.0.0 before
// the first) and the commit.
func (r stampRequest) resolve(ctx context.Context) (Stamps, error) {
	if (r.version == "") == !r.snapshot {
		return Stamps{}, errors.New("give -version vX.Y.Z (a release) or -snapshot, one of them")
	}
	if r.version != "" && !semver.MatchString(r.version) {
		return Stamps{}, fmt.Errorf("-version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE], as the tag is written", r.version)
	}
	head, err := git(ctx, "rev-parse", "HEAD")
	if err != nil {
		return Stamps{}, fmt.Errorf("the stamps come from the checkout: %w", err)
	}
	dirty, err := git(ctx, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return Stamps{}, err
	}
	date, err := sourceDate(ctx)
	if err != nil {
		return Stamps{}, err
	}
	s := Stamps{Version: r.version, Commit: head, Date: date}
	if r.version != "" {
		if dirty != "" {
			return Stamps{}, fmt.Errorf("release %s: the tree has uncommitted changes:\n%s", r.version, dirty)
		}
		tags, err := git(ctx, "tag", "--points-at", "HEAD")
		if err != nil {
			return Stamps{}, err
		}
		if !slices.Contains(strings.Fields(tags), r.version) {
			return Stamps{}, fmt.Errorf("release %s: HEAD (%s) does not carry the tag %s", r.version, head[:12], r.version)
		}
		return s, nil
	}
	last, err := git(ctx, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*")
	if err != nil || !semver.MatchString(last) {
		last = "v0.0.0" // no release tag yet
	}
	s.Version = last + "-snapshot-" + head[:12]
	if dirty != "" {
		s.Commit += "-dirty"
	}
	return s, nil
}

// orFromCheckout fills the stamps binary was not given from the checkout,
// when there is one; without one (the image's build) they stay empty, and
// the binary says so.
func (s Stamps) orFromCheckout(ctx context.Context) Stamps {
	if s.Commit == "" {
		if head, err := git(ctx, "rev-parse", "HEAD"); err == nil {
			s.Commit = head
		}
	}
	if s.Date == "" && s.Commit != "" {
		if date, err := sourceDate(ctx); err == nil {
			s.Date = date
		}
	}
	return s
}

// sourceDate is the date a build carries: SOURCE_DATE_EPOCH when set (the
// reproducible-builds convention), else the commit's time, so that
// building the same commit again gives the same bytes.
func sourceDate(ctx context.Context) (string, error) {
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		var err error
		if epoch, err = git(ctx, "log", "-1", "--format=%ct"); err != nil {
			return "", err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return "", fmt.Errorf("the source's date %q: %w", epoch, err)
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339), nil
}

func git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
