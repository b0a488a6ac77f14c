package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/tools"
)

// TestInstructionsNameWhatExists reads the instructions a client gets at
// initialize and checks that every tool they name is in tools/list, and that
// they tell how sessions, rollback and errors work.
func TestInstructionsNameWhatExists(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	text := c.Session.InitializeResult().Instructions
	listed := map[string]bool{}
	for tool, err := range c.Session.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[tool.Name] = true
	}
	named := regexp.MustCompile(`\b(whoami|(?:get|list|create|update|archive|restore|rollback|search|sync|link|unlink|import)_[a-z_]+)\b`).FindAllString(text, -1)
	if len(named) < 5 {
		t.Fatalf("the instructions name only %v", named)
	}
	for _, n := range named {
		if strings.HasSuffix(n, "_X") {
			continue
		}
		if !listed[n] {
			t.Errorf("the instructions name %q, which is not a tool", n)
		}
	}
	// What the schemas leave out is said here: the default limits, the
	// rules of a free-form object, what a tool that writes answers.
	for _, want := range []string{"X-Agent-Session-Id", "rollback_session", "invalid_argument", "archive_X", "emails",
		fmt.Sprintf("at most %d characters", tools.MaxText), fmt.Sprintf("at most %d elements", tools.MaxItems), "free-form: " + repo.FreeFormRules, "as its get_ tool shows it"} {
		if !strings.Contains(text, want) {
			t.Errorf("the instructions do not mention %s:\n%s", want, text)
		}
	}
}
