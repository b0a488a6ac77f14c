package repo

import "context"

// Abandon stops the store as a killed process would leave it (no index
// checkpoint written, the last write intent as it stands) and disconnects:
// for benchmarks and tests of the start after a crash.
func (s *Store) Abandon(ctx context.Context) error {
	s.Engine.Abandon()
	return s.client.Disconnect(ctx)
}
