// Command elfcheck tells whether each binary CI cross-compiled is a static
// Linux executable of its platform: CI cannot count on `file` being
// installed, and a binary that needs a loader or a libc the small host lacks
// only fails there.
//
//	go run ./.ci/elfcheck linux/amd64=DIR/jetledger-linux-amd64 linux/arm/v7=DIR/jetledger-linux-arm-v7
//
// For each PLATFORM=FILE it prints the platform, the size and the file, or
// every way the file differs from a static executable of that platform, and
// exits 1 if any does (2 on bad arguments).
package main

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// The ways a file can fail, one sentinel each, so that callers (and the
// tests) tell them apart with errors.Is.
var (
	errMachine = errors.New("wrong machine")
	errClass   = errors.New("wrong ELF class")
	errOrder   = errors.New("wrong byte order")
	errOSABI   = errors.New("wrong OS ABI")
	errType    = errors.New("not an ET_EXEC executable")
	errInterp  = errors.New("needs a loader (PT_INTERP)")
	errDynamic = errors.New("dynamic (PT_DYNAMIC or a dynamic section)")
	errNeeded  = errors.New("needs a shared library (DT_NEEDED)")
	errNotGo   = errors.New("no Go build information")
	errBuild   = errors.New("built for another target")
)

// target is what an executable of one platform looks like.
type target struct {
	machine elf.Machine
	class   elf.Class
	goarch  string
	goarm   string // GOARM the build must record; empty: not an arm target
}

// targets are the platforms elfcheck knows: the ones the binary ships for.
var targets = map[string]target{
	"linux/amd64":  {machine: elf.EM_X86_64, class: elf.ELFCLASS64, goarch: "amd64"},
	"linux/arm64":  {machine: elf.EM_AARCH64, class: elf.ELFCLASS64, goarch: "arm64"},
	"linux/arm/v7": {machine: elf.EM_ARM, class: elf.ELFCLASS32, goarch: "arm", goarm: "7"},
	"linux/arm/v6": {machine: elf.EM_ARM, class: elf.ELFCLASS32, goarch: "arm", goarm: "6"},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: elfcheck PLATFORM=FILE... (PLATFORM: linux/amd64, linux/arm64, linux/arm/v7)")
		return 2
	}
	code := 0
	for _, arg := range args {
		platform, path, ok := strings.Cut(arg, "=")
		if _, known := targets[platform]; !ok || !known || path == "" {
			fmt.Fprintf(stderr, "elfcheck: %q: want PLATFORM=FILE with PLATFORM one of linux/amd64, linux/arm64, linux/arm/v7, linux/arm/v6\n", arg)
			return 2
		}
		size, err := check(platform, path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: not a static %s executable:\n%v\n", path, platform, err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%-13s %9d bytes (%5.1f MiB)  %s\n", platform, size, float64(size)/(1<<20), path)
	}
	return code
}

// check returns the file's size, or every problem found in it, joined.
func check(platform, path string) (int64, error) {
	t := targets[platform]
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	f, err := elf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var problems []error
	bad := func(kind error, format string, a ...any) {
		problems = append(problems, fmt.Errorf("  %w: "+format, append([]any{kind}, a...)...))
	}

	if f.Machine != t.machine {
		bad(errMachine, "%s, want %s", f.Machine, t.machine)
	}
	if f.Class != t.class {
		bad(errClass, "%s, want %s", f.Class, t.class)
	}
	if f.Data != elf.ELFDATA2LSB {
		bad(errOrder, "%s, want %s", f.Data, elf.ELFDATA2LSB)
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		bad(errOSABI, "%s, want %s or %s", f.OSABI, elf.ELFOSABI_NONE, elf.ELFOSABI_LINUX)
	}
	// A static-pie would be ET_DYN with a PT_DYNAMIC to relocate itself;
	// Go's static build is a plain ET_EXEC.
	if f.Type != elf.ET_EXEC {
		bad(errType, "%s, want %s", f.Type, elf.ET_EXEC)
	}
	// The program headers are what the kernel reads: a stripped section
	// table cannot hide a loader or a dynamic segment from these.
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			interp, _ := io.ReadAll(io.LimitReader(p.Open(), 256))
			bad(errInterp, "loader %s", strings.TrimRight(string(interp), "\x00"))
		case elf.PT_DYNAMIC:
			bad(errDynamic, "PT_DYNAMIC segment")
		}
	}
	if f.SectionByType(elf.SHT_DYNAMIC) != nil {
		bad(errDynamic, "dynamic section")
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		bad(errNeeded, "reading DT_NEEDED: %v", err)
	}
	for _, lib := range libs {
		bad(errNeeded, "%s", lib)
	}
	// The ELF header cannot tell ARMv7 from ARMv6; the Go build record can.
	if info, err := buildinfo.ReadFile(path); err != nil {
		bad(errNotGo, "%v", err)
	} else {
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		want := map[string]string{"GOOS": "linux", "GOARCH": t.goarch, "CGO_ENABLED": "0"}
		if t.goarm != "" {
			want["GOARM"] = t.goarm
		}
		for _, k := range []string{"GOOS", "GOARCH", "GOARM", "CGO_ENABLED"} {
			if v, ok := want[k]; ok && settings[k] != v {
				bad(errBuild, "%s=%q, want %q", k, settings[k], v)
			}
		}
	}
	return st.Size(), errors.Join(problems...)
}
