// Command release builds oncehook's release artifacts, and is their one
// definition: the release workflow (.github/workflows/release.yml) runs it
// on a tag, CI (.ci/run) runs it as a snapshot that publishes nothing, and
// the Dockerfile builds the image's binary with it, so a binary is built
// the same way wherever it comes from.
//
//	go run ./internal/release build -version v1.2.3 [-out dist]   a release: HEAD must carry the tag, the tree clean
//	go run ./internal/release build -snapshot [-targets T] [-out dist]   the same artifacts, versioned after the commit
//	go run ./internal/release check [-targets T] [-out dist]      verify them, and smoke-test this platform's binary
//	go run ./internal/release binary -o PATH [-goos OS -goarch ARCH] [-version V -commit C -date D]
//	go run ./internal/release stamps -version v1.2.3|-snapshot   version=, commit=, date= lines (for the image's build)
//
// build writes one archive per target (a .tar.gz, a .zip for Windows)
// holding the binary and the README, and oncehook_<version>_checksums.txt
// (SHA-256, in sha256sum's format). Every binary is static (cgo off: the
// SQLite driver is pure Go), built with -trimpath, and stamped with the
// release, its commit and the commit's time, which is also the archives'
// time: building a tag again gives the same bytes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
)

const usage = `Usage: go run ./internal/release COMMAND [flags]

  build  -version v1.2.3 | -snapshot [-targets all|os/arch,...]  [-out dist]   every target's archive and the checksums
  check  [-targets all|os/arch,...] [-out dist]     verify build's output; smoke-test this platform's binary
  binary -o PATH [-goos OS -goarch ARCH] [-version V -commit C -date D]   one binary, as build makes it
  stamps -version v1.2.3 | -snapshot                the version, commit and date build would stamp
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := chdirModuleRoot(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "release:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "dist", "the folder for the archives and the checksums")
	var req stampRequest
	fs.StringVar(&req.version, "version", "", "the release, vMAJOR.MINOR.PATCH[-PRERELEASE]: HEAD must carry this tag")
	fs.BoolVar(&req.snapshot, "snapshot", false, "version the artifacts after the commit; publish nothing")
	targetList := fs.String("targets", "all", "a snapshot's platforms: all, or os/arch,... among the release's (host: this one)")
	switch args[0] {
	case "build", "stamps":
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		only, err := parseTargets(*targetList)
		if err != nil {
			return err
		}
		if !req.snapshot && len(only) != len(targets) {
			return errors.New("-targets: a release builds every target; only a -snapshot builds fewer")
		}
		s, err := req.resolve(ctx)
		if err != nil {
			return err
		}
		if args[0] == "stamps" {
			fmt.Fprintf(stdout, "version=%s\ncommit=%s\ndate=%s\n", s.Version, s.Commit, s.Date)
			return nil
		}
		return build(ctx, s, only, *out, stdout)
	case "check":
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		only, err := parseTargets(*targetList)
		if err != nil {
			return err
		}
		return check(ctx, *out, only, stdout)
	case "binary":
		return binaryCmd(ctx, args[1:], stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// binaryCmd builds one binary, for the Dockerfile: its target comes from
// -goos and -goarch (BuildKit's TARGETOS and TARGETARCH; empty is this
// platform's), its stamps from the flags (the image's build has no .git),
// else from git when there is a checkout, else none.
func binaryCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("binary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "where to write the binary")
	goos := fs.String("goos", "", "the target's OS (default: this one)")
	goarch := fs.String("goarch", "", "the target's architecture (default: this one)")
	var s Stamps
	fs.StringVar(&s.Version, "version", "", "the release to stamp")
	fs.StringVar(&s.Commit, "commit", "", "the commit to stamp")
	fs.StringVar(&s.Date, "date", "", "the source's date to stamp (RFC 3339)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("binary: -o is required")
	}
	s = s.orFromCheckout(ctx)
	t := hostTarget()
	if *goos != "" {
		t.OS = *goos
	}
	if *goarch != "" {
		t.Arch = *goarch
	}
	return goBuild(ctx, t, s, *out)
}

// chdirModuleRoot moves to the module's folder, where ./cmd/oncehook and
// README.md are, so that the tool runs from anywhere in the checkout.
func chdirModuleRoot(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return errors.New("not inside oncehook's module")
	}
	return os.Chdir(filepath.Dir(mod))
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s takes no argument (got %q)", fs.Name(), fs.Arg(0))
	}
	return nil
}
