package repo

import "context"

// InsertCoverageForTest stores a coverage record through the write path, for
// tests of the groups that link to coverage until the coverage tools exist.
// It validates nothing: production code never calls it.
func (s *Store) InsertCoverageForTest(ctx context.Context, c *Coverage) error {
	if c.ContactIDs == nil {
		c.ContactIDs = []string{}
	}
	return insert(ctx, s, collCoverage, c)
}
