package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"outreach/internal/doctest"
)

// configPath is the page whose Configuration table lists every setting.
const configPath = "../../docs/operations.md"

// TestDocConfiguration holds the Configuration table (docs/operations.md)
// to the command: every flag `serve` takes (as its -h lists them) and every
// variable this command reads has a row, so no setting is left out.
func TestDocConfiguration(t *testing.T) {
	rows, err := doctest.TableRows(configPath, "Configuration")
	if err != nil {
		t.Fatal(err)
	}
	documented := func(name string) bool {
		for _, row := range rows {
			if first, _, _ := strings.Cut(row[2:], " | "); strings.Contains(first, "`"+name+"`") {
				return true
			}
		}
		return false
	}

	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	// The backup package reads the S3 target's settings itself.
	sources = append(sources, "../../backup/s3.go")
	seen := map[string]bool{}
	for _, src := range sources {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		code, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range regexp.MustCompile(`\bOUTREACH_[A-Z0-9_]*[A-Z0-9]\b|\bMONGODB_URI\b`).FindAllString(string(code), -1) {
			if !seen[name] {
				seen[name] = true
				t.Setenv(name, "")
				if !documented(name) {
					t.Errorf("%s: the Configuration table has no row for %s, which %s reads", configPath, name, src)
				}
			}
		}
	}
	if len(seen) < 10 {
		t.Fatalf("found %d variables in the command's code", len(seen))
	}

	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"serve", "-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve -h: %v, want the flags' help\n%s", err, stderr.String())
	}
	flags := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(stderr.String(), -1)
	if len(flags) < 5 {
		t.Fatalf("serve -h listed %d flags:\n%s", len(flags), stderr.String())
	}
	for _, f := range flags {
		if !documented("--" + f[1]) {
			t.Errorf("%s: the Configuration table has no row for serve's flag --%s", configPath, f[1])
		}
	}
	// A string flag's default (the variables are unset above) is the one
	// its row gives.
	defaults := map[string]string{}
	current := ""
	for _, l := range strings.Split(stderr.String(), "\n") {
		if m := regexp.MustCompile(`^  -([a-z][a-z0-9-]*)( string)?$`).FindStringSubmatch(l); m != nil {
			current = ""
			if m[2] != "" {
				current = m[1]
			}
			continue
		}
		if m := regexp.MustCompile(`\(default "([^"]*)"\)$`).FindStringSubmatch(l); m != nil && current != "" && strings.HasPrefix(l, "    ") {
			defaults[current] = m[1]
		}
	}
	if defaults["addr"] == "" {
		t.Fatalf("serve -h gave no default address:\n%s", stderr.String())
	}
	for name, def := range defaults {
		for _, row := range rows {
			cells := strings.Split(row, " | ")
			if len(cells) > 1 && strings.Contains(cells[0], "`--"+name+"`") && !strings.Contains(cells[1], "`"+def+"`") {
				t.Errorf("%s: the Configuration row of --%s gives the default %q, the code %q", configPath, name, cells[1], def)
			}
		}
	}
}
