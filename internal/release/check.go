package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// check verifies build's output in dir as a user receives it: the
// checksums file names each of targets' archives and nothing else, each with
// its SHA-256; each archive holds the README and a static binary built for
// its platform the release's way; this platform's binary names the
// release, its commit and date, and every other binary carries the same
// stamps; and this platform's binary runs (smoke).
func check(ctx context.Context, dir string, targets []Target, log io.Writer) error {
	matches, err := filepath.Glob(filepath.Join(dir, "oncehook_*_checksums.txt"))
	if err != nil || len(matches) != 1 {
		return fmt.Errorf("%s: want one oncehook_<version>_checksums.txt, found %d", dir, len(matches))
	}
	sums, err := verifyChecksums(dir, filepath.Base(matches[0]))
	if err != nil {
		return err
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(matches[0]), "oncehook_"), "_checksums.txt")
	var want []string
	for _, t := range targets {
		want = append(want, t.archiveName(version))
	}
	if got := slices.Sorted(maps.Keys(sums)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		return fmt.Errorf("the checksums name %v; a release is %v", got, want)
	}
	binaries := map[Target][]byte{}
	for _, t := range targets {
		name := t.archiveName(version)
		files, err := readArchive(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, []string{"README.md", t.binaryName()}) {
			return fmt.Errorf("%s holds %v: want %s and README.md", name, got, t.binaryName())
		}
		if err := inspectBinary(t, files[t.binaryName()]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		binaries[t] = files[t.binaryName()]
	}
	host, ok := binaries[hostTarget()]
	if !ok {
		return fmt.Errorf("no release binary runs on %s: nothing to smoke-test", hostTarget())
	}
	sm, err := newSmoke(host)
	if err != nil {
		return err
	}
	defer sm.close()
	stamps, err := sm.version(ctx, log)
	if err != nil {
		return err
	}
	if strings.TrimPrefix(stamps.Version, "v") != version {
		return fmt.Errorf("the %s binary is stamped %s, its archive %s", hostTarget(), stamps.Version, version)
	}
	// -trimpath leaves -ldflags out of the build information (go.dev/issue/52372),
	// so the other platforms' stamps are read as the strings they hold.
	for _, t := range targets {
		for _, v := range []string{stamps.Version, stamps.Commit, stamps.Date} {
			if !bytes.Contains(binaries[t], []byte(v)) {
				return fmt.Errorf("%s: its binary is not stamped %s, as the %s one is", t.archiveName(version), v, hostTarget())
			}
		}
		fmt.Fprintf(log, "  %-14s %s: checksum, platform (static on linux), cgo off, stamped\n", t, t.archiveName(version))
	}
	return sm.serve(ctx, log)
}

// verifyChecksums reads a checksums file in sha256sum's format and checks
// every file it names, and that every other file in dir is named.
func verifyChecksums(dir, file string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if b, err := hex.DecodeString(sum); !ok || err != nil || len(b) != 32 || name == "" || strings.ContainsAny(name, `/\`) {
			return nil, fmt.Errorf("%s:%d: %q is not a SHA-256 and a file name", file, n, sc.Text())
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("%s:%d: %s is named twice", file, n, name)
		}
		got, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
		if got != sum {
			return nil, fmt.Errorf("%s: SHA-256 %s, where %s says %s", name, got, file, sum)
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if _, ok := sums[e.Name()]; !ok && e.Name() != file {
			return nil, fmt.Errorf("%s is not in %s", e.Name(), file)
		}
	}
	return sums, nil
}

// inspectBinary checks that exe is an executable for t, static, and
// built the release's way (goBuild), from its headers and the build
// information Go records.
func inspectBinary(t Target, exe []byte) error {
	if err := checkFormat(t, exe); err != nil {
		return err
	}
	bi, err := buildinfo.Read(bytes.NewReader(exe))
	if err != nil {
		return fmt.Errorf("no Go build information: %w", err)
	}
	if bi.Path != "github.com/oncehook/oncehook/cmd/oncehook" {
		return fmt.Errorf("the binary of %s, not of cmd/oncehook", bi.Path)
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	for k, v := range map[string]string{"GOOS": t.OS, "GOARCH": t.Arch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if set[k] != v {
			return fmt.Errorf("built with %s=%q, not %q", k, set[k], v)
		}
	}
	return nil
}

// checkFormat reads exe's headers as the target's loader would: its
// format and machine, and (Linux) that it asks for no dynamic loader or
// library, so it runs on any distribution and on the image's empty base.
func checkFormat(t Target, exe []byte) error {
	r := bytes.NewReader(exe)
	machine := map[string]map[string]string{
		"linux":   {"amd64": elf.EM_X86_64.String(), "arm64": elf.EM_AARCH64.String()},
		"darwin":  {"amd64": macho.CpuAmd64.String(), "arm64": macho.CpuArm64.String()},
		"windows": {"amd64": fmt.Sprint(pe.IMAGE_FILE_MACHINE_AMD64), "arm64": fmt.Sprint(pe.IMAGE_FILE_MACHINE_ARM64)},
	}[t.OS][t.Arch]
	var got string
	switch t.OS {
	case "linux":
		f, err := elf.NewFile(r)
		if err != nil {
			return fmt.Errorf("not an ELF executable: %w", err)
		}
		if got = f.Machine.String(); got != machine {
			break
		}
		if slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
			return errors.New("the binary asks for a dynamic loader: it would not start without a libc")
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			return fmt.Errorf("the binary needs %v", libs)
		}
	case "darwin":
		f, err := macho.NewFile(r)
		if err != nil {
			return fmt.Errorf("not a Mach-O executable: %w", err)
		}
		got = f.Cpu.String()
	case "windows":
		f, err := pe.NewFile(r)
		if err != nil {
			return fmt.Errorf("not a PE executable: %w", err)
		}
		got = fmt.Sprint(f.Machine)
	}
	if machine == "" || got != machine {
		return fmt.Errorf("an executable for %s, not for %s (%s)", got, t, machine)
	}
	return nil
}
