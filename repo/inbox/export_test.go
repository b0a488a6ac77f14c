package inbox

// Hooks of the area's external tests (package inbox_test): built only
// into the tests.

// MaxThreadBytesVar is maxThreadBytes, for a test to lower.
var MaxThreadBytesVar = &maxThreadBytes
