package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// goBuild builds the Go package in dir for platform into a temporary file.
// The flags are .ci/run's, so the cross-compiled standard library comes
// from the cache its jetledger builds left.
func goBuild(t *testing.T, dir, platform string, env ...string) string {
	t.Helper()
	parts := strings.Split(platform, "/")
	out := filepath.Join(t.TempDir(), strings.ReplaceAll(platform, "/", "-"))
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+parts[0], "GOARCH="+parts[1])
	if len(parts) == 3 {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(parts[2], "v"))
	}
	cmd.Env = append(cmd.Env, env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s: %v\n%s", platform, err, b)
	}
	return out
}

// hostPlatform is the platform of the machine running the test, if elfcheck
// knows it.
func hostPlatform(t *testing.T) string {
	t.Helper()
	p := runtime.GOOS + "/" + runtime.GOARCH
	if runtime.GOARCH == "arm" {
		p += "/v7"
	}
	if _, ok := targets[p]; !ok {
		t.Skipf("elfcheck does not know this machine's platform %s", p)
	}
	return p
}

// A static build of elfcheck itself passes for its own platform, and fails
// for the others with the difference named.
func TestStaticBuildsPassForTheirPlatformOnly(t *testing.T) {
	built := map[string]string{}
	for _, p := range []string{"linux/amd64", "linux/arm64", "linux/arm/v7"} {
		built[p] = goBuild(t, ".", p, "CGO_ENABLED=0")
		if _, err := check(p, built[p]); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if code := run([]string{"linux/amd64=" + built["linux/amd64"], "linux/arm/v7=" + built["linux/arm/v7"]}, io.Discard, io.Discard); code != 0 {
		t.Errorf("run: exit %d, want 0", code)
	}
	tests := []struct {
		platform, file string
		want           []error
	}{
		{platform: "linux/arm64", file: built["linux/amd64"], want: []error{errMachine, errBuild}},
		{platform: "linux/amd64", file: built["linux/arm/v7"], want: []error{errMachine, errClass, errBuild}},
		{platform: "linux/arm/v7", file: built["linux/arm64"], want: []error{errMachine, errClass, errBuild}},
		// Only the Go build record tells ARMv6 from ARMv7.
		{platform: "linux/arm/v6", file: built["linux/arm/v7"], want: []error{errBuild}},
	}
	for _, tt := range tests {
		_, err := check(tt.platform, tt.file)
		for _, want := range tt.want {
			if !errors.Is(err, want) {
				t.Errorf("%s as %s: %v, want %v", filepath.Base(tt.file), tt.platform, err, want)
			}
		}
		if errors.Is(err, errInterp) || errors.Is(err, errDynamic) || errors.Is(err, errNeeded) {
			t.Errorf("%s as %s: a static file called dynamic: %v", filepath.Base(tt.file), tt.platform, err)
		}
		if code := run([]string{tt.platform + "=" + tt.file}, io.Discard, io.Discard); code != 1 {
			t.Errorf("run %s=%s: exit %d, want 1", tt.platform, filepath.Base(tt.file), code)
		}
	}
}

// A cgo program is linked against libc and needs the loader: refused.
func TestCgoBuildIsDynamic(t *testing.T) {
	platform := hostPlatform(t)
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc: cannot build a cgo program")
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module cgohello\n\ngo 1.21\n",
		"main.go": "package main\n\n// int two(void) { return 2; }\nimport \"C\"\n\nfunc main() { println(C.two()) }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := goBuild(t, dir, platform, "CGO_ENABLED=1")
	_, err := check(platform, bin)
	for _, want := range []error{errInterp, errDynamic, errNeeded, errBuild} {
		if !errors.Is(err, want) {
			t.Errorf("cgo build: %v, want %v", err, want)
		}
	}
}

// A C program of the system (dynamic on every Linux distribution that
// ships ls) is refused, and is not taken for a Go build.
func TestSystemBinaryIsDynamic(t *testing.T) {
	platform := hostPlatform(t)
	const ls = "/bin/ls"
	if _, err := os.Stat(ls); err != nil {
		t.Skipf("%s: %v", ls, err)
	}
	_, err := check(platform, ls)
	for _, want := range []error{errInterp, errDynamic, errNeeded, errNotGo} {
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", ls, err, want)
		}
	}
}

func TestBadArgumentsExit2(t *testing.T) {
	for _, args := range [][]string{nil, {"linux/amd64"}, {"linux/mips=/bin/ls"}, {"linux/amd64="}} {
		if code := run(args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
