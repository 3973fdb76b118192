package main

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/alecthomas/kong"
)

// versionCmd is `jetledger version`.
type versionCmd struct{}

func (versionCmd) Run(inv *invocation) error {
	fmt.Fprintln(inv.stdout, version())
	return nil
}

// versionFlag is --version: the same line as `jetledger version`, exit 0.
type versionFlag bool

// BeforeReset prints the version before any other flag is looked at.
func (versionFlag) BeforeReset(app *kong.Kong) error {
	fmt.Fprintln(app.Stdout, version())
	app.Exit(exitOK)
	return nil
}

// version describes this binary from the build information Go embeds.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "jetledger (no build information) " + runtime.Version()
	}
	return formatVersion(bi)
}

// formatVersion is "jetledger <module version> commit <rev>[+dirty] (<vcs
// time>) <go version> <os>/<arch>". A build without VCS stamping (go run,
// -buildvcs=false, a build outside the repository) says "commit unknown".
func formatVersion(bi *debug.BuildInfo) string {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	commit := "unknown"
	if rev := settings["vcs.revision"]; rev != "" {
		commit = rev
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if settings["vcs.modified"] == "true" {
			commit += "+dirty"
		}
		if t := settings["vcs.time"]; t != "" {
			commit += " (" + t + ")"
		}
	}
	goos, goarch := cmp.Or(settings["GOOS"], runtime.GOOS), cmp.Or(settings["GOARCH"], runtime.GOARCH)
	return fmt.Sprintf("jetledger %s commit %s %s %s/%s", cmp.Or(bi.Main.Version, "(devel)"), commit, bi.GoVersion, goos, goarch)
}
