package tools

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocLinks checks every relative link of README.md and docs/: the file
// it names exists, and the heading its #anchor names is on that page, so a
// section moved or renamed fails here until its links follow it.
func TestDocLinks(t *testing.T) {
	files := []string{"../README.md"}
	err := filepath.WalkDir("../docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := markdownAnchors(string(b))
		anchors[path] = a
		return a, nil
	}
	links := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(l.target) {
				continue // a URL, not a file of the project
			}
			links++
			path, frag, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link to %s: %v", file, l.line, l.target, err)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link to %s: an anchor on a file that is not Markdown", file, l.line, l.target)
				continue
			}
			a, err := anchorsOf(target)
			if err != nil {
				t.Fatal(err)
			}
			if !a[frag] {
				t.Errorf("%s:%d: link to %s: %s has no heading with the anchor #%s", file, l.line, l.target, target, frag)
			}
		}
	}
	if links == 0 {
		t.Fatal("found no relative link in README.md and docs/")
	}
}

type markdownLink struct {
	target string
	line   int
}

// markdownLinks returns the inline links of a Markdown text outside fenced
// code blocks and code spans.
func markdownLinks(text string) []markdownLink {
	var links []markdownLink
	link := regexp.MustCompile(`\]\(([^()\s]+)\)`)
	code := regexp.MustCompile("`[^`]*`")
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(line, ""), -1) {
			links = append(links, markdownLink{m[1], i + 1})
		}
	}
	return links
}

// markdownAnchors returns the anchors of a page's headings as GitHub makes
// them: lower case, punctuation but hyphens and underscores dropped, spaces
// made hyphens, and -1, -2, … after a repeated one.
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{M}\p{N}\p{Pc} -]`)
	heading := regexp.MustCompile(`^#{1,6} (.*)$`)
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), ""), " ", "-")
		a := slug
		for n := 1; anchors[a]; n++ {
			a = slug + "-" + strconv.Itoa(n)
		}
		anchors[a] = true
	}
	return anchors
}
