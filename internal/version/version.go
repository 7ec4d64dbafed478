// Package version holds the build's version, set by the Makefile with
// -ldflags "-X nodeagent/internal/version.Version=...".
package version

// Version of this build.
var Version = "dev"
