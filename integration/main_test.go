package integration

import (
	"os"
	"testing"
)

// TestMain removes the service binary that the process tests build.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
