package repo

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
)

// The URL-signing secret (the pipeline's, repo/pipeline/mediakey.go) is
// never in the store, where every reader of the database would see it.
// Older versions kept it in a settings record; the core removes that copy
// when the store opens (dropStoredSigningSecret) and its rollback rule
// never brings it back (rollback.go).

// signingID is the id of the settings record that held the URL-signing
// secret before it left the store (dropStoredSigningSecret).
const signingID = "6d1f4a8e-3c2b-4f7a-9e05-8b1c2d3e4f50"

type setting struct {
	Meta   `bson:",inline"`
	Name   string `bson:"name"`
	Secret string `bson:"secret,omitempty"`
}

// dropStoredSigningSecret takes the URL-signing secret out of the settings
// record that older versions kept it in: an update through the write path
// that removes it (its change entry shows it as [redacted]) and archives the
// record, which nothing reads any more. The old secret is not adopted: it
// was readable by whoever could read the store, so URLs signed with it stop
// working (they live minutes), and a store that never had one is untouched.
func (s *Store) dropStoredSigningSecret(ctx context.Context) error {
	var st setting
	err := s.coll(CollSettings).FindOne(ctx, bson.M{"_id": signingID, "secret": bson.M{"$exists": true}}).Decode(&st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("media URL secret: %w", err)
	}
	ctx = audit.WithActor(ctx, SystemActor("media-url-signing"))
	_, err = Modify(ctx, s, CollSettings, signingID, audit.ActionArchive, func(st *setting) error {
		st.Secret = ""
		if st.ArchivedAt == nil {
			t := Now()
			st.ArchivedAt = &t
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("media URL secret: remove the copy older versions stored in settings: %w", err)
	}
	s.Log.Info().Msg("media URL signing: the secret older versions kept in the settings collection was removed; URLs signed before now are refused")
	return nil
}
