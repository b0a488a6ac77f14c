package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// IndexIDs gives each collection of database an index on the expression by
// which FerretDB looks a document up by _id.
//
// FerretDB 1.24's SQLite backend answers a find, update or delete by one
// _id with `WHERE _ferretdb_sjson->'$._id' = ?`, but builds its own _id
// index on `_ferretdb_sjson->"_id"`. SQLite uses an index on an expression
// only for that same expression, so every look-up by _id scanned its table
// (a quarter of a second at 5,000 notes). The index made here is SQLite's
// own on FerretDB's expression: it changes no document, FerretDB does not
// list it (mongosh's getIndexes shows FerretDB's), and SQLite keeps it on
// every write. Run once the collections exist; it is idempotent.
func (s *Store) IndexIDs(ctx context.Context, database string) error {
	if s.dir == "" {
		return nil // in memory: each connection would see its own database
	}
	path := filepath.Join(s.dir, database+".sqlite")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	db, err := openFile(path)
	if err != nil {
		return fmt.Errorf("index _id look-ups: %w", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM "_ferretdb_collections"`)
	if err != nil {
		return fmt.Errorf("index _id look-ups: %w", err)
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return fmt.Errorf("index _id look-ups: %w", err)
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("index _id look-ups: %w", err)
	}
	for _, t := range tables {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (_ferretdb_sjson->'$._id')`, t+"_outreach_id_lookup", t)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("index _id look-ups of %s: %w", t, err)
		}
	}
	return nil
}

// IndexCheckpoint is the file beside database's SQLite file where the
// service keeps its indexes' checkpoint; empty in memory.
func (s *Store) IndexCheckpoint(database string) string {
	if s.dir == "" {
		return ""
	}
	return filepath.Join(s.dir, database+".index")
}

// openFile opens one of the store's SQLite files beside FerretDB, through
// FerretDB's own driver (modernc.org/sqlite, registered as "sqlite"),
// waiting for FerretDB's writers rather than failing on their lock.
func openFile(path string) (*sql.DB, error) {
	return sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=busy_timeout(30000)"}).String())
}
