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
)

// configPath is the page whose Configuration table lists every setting.
const configPath = "../../docs/operations.md"

// TestDocConfiguration holds the Configuration table (docs/operations.md)
// to the command: every flag `serve` takes (as its -h lists them) and every
// variable this command reads has a row, so no setting is left out.
func TestDocConfiguration(t *testing.T) {
	b, err := os.ReadFile(configPath)
	if err != nil {
		t.Fatal(err)
	}
	section := string(b)
	start := strings.Index(section, "\n## Configuration\n")
	if start < 0 {
		t.Fatalf("%s has no Configuration section", configPath)
	}
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var rows []string
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "| ") {
			rows = append(rows, l)
		}
	}
	documented := func(name string) bool {
		for _, row := range rows {
			if first, _, _ := strings.Cut(row[2:], " | "); strings.Contains(first, "`"+name+"`") {
				return true
			}
		}
		return false
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

	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
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
				if !documented(name) {
					t.Errorf("%s: the Configuration table has no row for %s, which %s reads", configPath, name, src)
				}
			}
		}
	}
	if len(seen) < 10 {
		t.Fatalf("found %d variables in the command's code", len(seen))
	}
}
