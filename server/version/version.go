// Package version holds the service's version string.
package version

// Version is set at build time with -ldflags "-X outreach/server/version.Version=…".
var Version = "0.1.0-dev"
