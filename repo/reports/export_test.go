package reports

// Hooks of the area's external tests (package reports_test): built only
// into the tests.

// OrgSettingsID is the id of the organisation settings' record.
var OrgSettingsID = orgSettingsID
