package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// The look-ups below answer, from SQLite's own indexes, the two questions
// the service asks at start that FerretDB 1.24 would answer by decoding
// every document of a collection: which change entries came after a
// checkpoint (a range on an integer field) and which are left pending (an
// equality on a string field). FerretDB pushes down only an equality on
// _id; these read its table directly, and only the ids: the documents are
// then read by _id through FerretDB, as every other read is. Like IndexIDs
// they change no document.

// errNoFiles: the store is in memory, where another connection sees
// another database.
var errNoFiles = errors.New("the store is in memory: no look-up outside FerretDB")

// fieldName is a field the look-ups accept: a plain top-level name.
var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// IDsAbove returns the _ids of collection's documents whose integer field is
// above the given value, in the field's order. It gives the table an index
// on the field (SQLite's own, once: the first call reads the table).
func (s *Store) IDsAbove(ctx context.Context, database, collection, field string, above int64) ([]string, error) {
	if !fieldName.MatchString(field) {
		return nil, fmt.Errorf("look-up on %q: not a plain field name", field)
	}
	expr := fmt.Sprintf(`_ferretdb_sjson->>'$.%s'`, field)
	return s.lookup(ctx, database, collection, func(table string) (string, []string) {
		return fmt.Sprintf(`SELECT _ferretdb_sjson->>'$._id' FROM %q WHERE %s > ? ORDER BY %s`, table, expr, expr),
			[]string{fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (%s)`, table+"_outreach_"+field+"_int", table, expr)}
	}, above)
}

// IDsEqual returns the _ids of collection's documents whose field holds the
// string value (not an array holding it). It reads FerretDB's own index on
// the field when there is one (the expression below is the one FerretDB
// indexes), else SQLite scans the table without FerretDB decoding it.
func (s *Store) IDsEqual(ctx context.Context, database, collection, field, value string) ([]string, error) {
	if !fieldName.MatchString(field) {
		return nil, fmt.Errorf("look-up on %q: not a plain field name", field)
	}
	return s.lookup(ctx, database, collection, func(table string) (string, []string) {
		return fmt.Sprintf(`SELECT _ferretdb_sjson->>'$._id' FROM %q WHERE _ferretdb_sjson->%q = json_quote(?)`, table, field), nil
	}, value)
}

// lookup runs one look-up on collection's table (none: no documents).
func (s *Store) lookup(ctx context.Context, database, collection string, query func(table string) (string, []string), arg any) ([]string, error) {
	if s.dir == "" {
		return nil, errNoFiles
	}
	path := filepath.Join(s.dir, database+".sqlite")
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var table string
	err = db.QueryRowContext(ctx, `SELECT table_name FROM "_ferretdb_collections" WHERE name = ?`, collection).Scan(&table)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look-up in %s: %w", collection, err)
	}
	q, prepare := query(table)
	for _, p := range prepare {
		if _, err := db.ExecContext(ctx, p); err != nil {
			return nil, fmt.Errorf("look-up in %s: %w", collection, err)
		}
	}
	rows, err := db.QueryContext(ctx, q, arg)
	if err != nil {
		return nil, fmt.Errorf("look-up in %s: %w", collection, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id sql.NullString
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("look-up in %s: %w", collection, err)
		}
		if !id.Valid {
			return nil, fmt.Errorf("look-up in %s: a document without a string _id", collection)
		}
		ids = append(ids, id.String)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look-up in %s: %w", collection, err)
	}
	return ids, nil
}
