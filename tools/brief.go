package tools

import (
	"regexp"
	"strings"
)

// Descriptions. A tool's description as written says what it does and the
// details an agent may need (what a field means, what is refused, which
// tool comes next). tools/list serves its first sentences only (brief), up
// to maxBrief characters, so the list fits an agent's context; the whole
// text is the tool's Details, which the toolset's page under docs/tools
// shows (TestDocToolPages holds the pages to it).

// maxBrief is the most characters of a served description beyond its first
// sentence.
const maxBrief = 160

var sentenceEnd = regexp.MustCompile(`[.!?]\s+[A-Z(]`)

// brief is the first sentence of d, and the next ones while the whole stays
// within maxBrief characters.
func brief(d string) string {
	d = strings.TrimSpace(d)
	out := ""
	rest := d
	for rest != "" {
		loc := sentenceEnd.FindStringIndex(rest)
		var s string
		if loc == nil {
			s, rest = rest, ""
		} else {
			s, rest = rest[:loc[0]+1], rest[loc[0]+1:]
		}
		s = strings.TrimSpace(s)
		if out != "" && len(out)+1+len(s) > maxBrief {
			break
		}
		if out != "" {
			out += " "
		}
		out += s
		rest = strings.TrimSpace(rest)
	}
	return out
}

// briefed serves each tool's brief description and keeps the whole one as
// its Details.
func briefed(tools []Tool) []Tool {
	for i := range tools {
		if tools[i].Details == "" {
			tools[i].Details = tools[i].Def.Description
		}
		tools[i].Def.Description = brief(tools[i].Details)
	}
	return tools
}
