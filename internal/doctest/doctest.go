// Package doctest reads the people's pages under docs/ for the tests that
// hold them to the code (a table of limits, of settings, of bounds).
package doctest

import (
	"fmt"
	"os"
	"strings"
)

// Section returns the text of the "## heading" section of the Markdown
// file at path, up to the next section of that level.
func Section(path, heading string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	text := string(b)
	start := strings.Index(text, "\n## "+heading+"\n")
	if start < 0 {
		return "", fmt.Errorf("%s has no section %q", path, heading)
	}
	text = text[start+1:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	return text, nil
}

// TableRows returns the table rows (lines starting with "| ") of the
// "## heading" section of the Markdown file at path.
func TableRows(path, heading string) ([]string, error) {
	section, err := Section(path, heading)
	if err != nil {
		return nil, err
	}
	var rows []string
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "| ") {
			rows = append(rows, l)
		}
	}
	return rows, nil
}
