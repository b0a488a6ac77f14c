package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// FerretDB 1.24's SQLite backend keeps its catalog (which collection lives
// in which table, with which indexes) in a table of each database file,
// `_ferretdb_collections`, and changes it in steps that are not one SQLite
// transaction: a new collection is a CREATE TABLE, then its catalog row,
// then its _id index, then the row's settings; a new index is a CREATE
// INDEX, then the settings. A process killed between two steps leaves a
// table or an index the catalog does not name, or a row without its _id
// index, and the next start fails on it: the next insert into that
// collection tries to create the table again ("table ... already exists")
// and recovery cannot finish a write the kill cut short.
//
// repairCatalog runs before FerretDB opens the files (the data directory's
// lock is held, so nothing else has them open) and finishes or undoes each
// such step, so that the catalog and the tables agree again:
//
//   - a table the catalog does not name is dropped when it is empty (a
//     collection's documents are written only once its creation finished,
//     so an interrupted creation leaves it empty; a table holding documents
//     is not the catalog's to lose: the start is refused, naming it);
//   - a catalog row without the _id index gets it, as FerretDB makes it;
//   - an index the catalog names but SQLite lacks is made, as FerretDB
//     makes it, and an index SQLite has but the catalog does not name is
//     dropped (the service's `outreach indexes` makes it again), except the
//     service's own look-up indexes (idindex.go, lookup.go);
//   - a database file without the catalog table gets it when it holds no
//     table yet (the file is made first, then the table).
//
// It changes no document. What it did is returned, a line per repair, for
// the service's log.
func repairCatalog(ctx context.Context, dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.sqlite"))
	if err != nil {
		return nil, err
	}
	var done []string
	for _, f := range files {
		fixed, err := repairFile(ctx, f)
		if err != nil {
			return done, fmt.Errorf("store file %s: %w", filepath.Base(f), err)
		}
		for _, r := range fixed {
			done = append(done, strings.TrimSuffix(filepath.Base(f), ".sqlite")+": "+r)
		}
	}
	return done, nil
}

// catalogTable is FerretDB's catalog table, and catalogDDL the statement it
// makes it with (metadata.Registry.databaseGetOrCreate).
const (
	catalogTable = "_ferretdb_collections"
	catalogDDL   = `CREATE TABLE "_ferretdb_collections" (name TEXT NOT NULL UNIQUE CHECK(name != ''), table_name TEXT NOT NULL UNIQUE CHECK(table_name != ''), settings TEXT NOT NULL CHECK(settings != '')) STRICT`
)

// ownIndex is the part of the name of the SQLite indexes the service makes
// itself beside FerretDB's (`<table>_outreach_...`).
const ownIndex = "_outreach_"

// settings mirrors FerretDB's metadata.Settings, as stored in the catalog's
// settings column (JSON).
type settings struct {
	UUID            string      `json:"uuid"`
	Indexes         []indexInfo `json:"indexes"`
	CappedSize      int64       `json:"cappedSize"`
	CappedDocuments int64       `json:"cappedDocuments"`
}

type indexInfo struct {
	Name   string         `json:"name"`
	Key    []indexKeyPair `json:"key"`
	Unique bool           `json:"unique"`
}

type indexKeyPair struct {
	Field      string `json:"field"`
	Descending bool   `json:"descending"`
}

// idIndex is the index FerretDB gives every collection.
var idIndex = indexInfo{Name: "_id_", Key: []indexKeyPair{{Field: "_id"}}, Unique: true}

// indexDDL is the statement FerretDB makes index with on table
// (metadata.Registry.indexesCreate).
func indexDDL(table string, index indexInfo) string {
	q := "CREATE "
	if index.Unique {
		q += "UNIQUE "
	}
	columns := make([]string, len(index.Key))
	for i, key := range index.Key {
		fields := strings.Split(key.Field, ".")
		for j, f := range fields {
			fields[j] = fmt.Sprintf("%q", f)
		}
		columns[i] = "_ferretdb_sjson->" + strings.Join(fields, "->")
		if key.Descending {
			columns[i] += " DESC"
		}
	}
	return q + fmt.Sprintf("INDEX %q ON %q (%s)", table+"_"+index.Name, table, strings.Join(columns, ", "))
}

// repairFile repairs one database file, in one SQLite transaction.
func repairFile(ctx context.Context, path string) (done []string, err error) {
	db, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
			done = nil
			return
		}
		if err = tx.Commit(); err != nil {
			done = nil
		}
	}()
	objects, err := schemaObjects(ctx, tx)
	if err != nil {
		return nil, err
	}
	tables := map[string]bool{}
	for _, o := range objects {
		if o.kind == "table" && !strings.HasPrefix(o.name, "sqlite_") {
			tables[o.name] = true
		}
	}
	if !tables[catalogTable] {
		if len(tables) > 0 {
			return nil, fmt.Errorf("it has tables but no %s: not a file of this store's", catalogTable)
		}
		if _, err := tx.ExecContext(ctx, catalogDDL); err != nil {
			return nil, err
		}
		return []string{"the catalog table was missing (the file's creation was cut short): made"}, nil
	}
	delete(tables, catalogTable)

	type row struct {
		name, table, raw string
		s                settings
	}
	var rows []row
	rs, err := tx.QueryContext(ctx, `SELECT name, table_name, settings FROM "_ferretdb_collections"`)
	if err != nil {
		return nil, err
	}
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.name, &r.table, &r.raw); err != nil {
			rs.Close()
			return nil, err
		}
		if err := json.Unmarshal([]byte(r.raw), &r.s); err != nil {
			rs.Close()
			return nil, fmt.Errorf("collection %s: settings: %w", r.name, err)
		}
		rows = append(rows, r)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, err
	}

	named := map[string]bool{}
	for _, r := range rows {
		named[r.table] = true
		if !tables[r.table] {
			return nil, fmt.Errorf("collection %s: its table %s is missing", r.name, r.table)
		}
	}
	for _, t := range sortedKeys(tables) {
		if named[t] {
			continue
		}
		var one int
		switch err := tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT 1 FROM %q LIMIT 1`, t)).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, err
		default:
			return nil, fmt.Errorf("table %s holds documents but the store's catalog names no collection for it; nothing was changed (restore the data directory from a backup)", t)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`DROP TABLE %q`, t)); err != nil {
			return nil, err
		}
		done = append(done, fmt.Sprintf("table %s, left empty by a collection's creation cut short, dropped", t))
	}

	indexes := map[string]map[string]bool{} // table -> SQLite index names
	for _, o := range objects {
		if o.kind == "index" && o.sql {
			if indexes[o.table] == nil {
				indexes[o.table] = map[string]bool{}
			}
			indexes[o.table][o.name] = true
		}
	}
	for _, r := range rows {
		changed, addedID := false, false
		if !slices.ContainsFunc(r.s.Indexes, func(i indexInfo) bool { return i.Name == idIndex.Name }) {
			r.s.Indexes = append([]indexInfo{idIndex}, r.s.Indexes...)
			changed, addedID = true, true
			done = append(done, fmt.Sprintf("collection %s had no _id index (its creation was cut short): added", r.name))
		}
		if r.s.UUID == "" {
			r.s.UUID = uuid.NewString()
			changed = true
		}
		want := map[string]bool{}
		for _, i := range r.s.Indexes {
			name := r.table + "_" + i.Name
			want[name] = true
			if indexes[r.table][name] {
				continue
			}
			if _, err := tx.ExecContext(ctx, indexDDL(r.table, i)); err != nil {
				return nil, fmt.Errorf("collection %s: index %s: %w", r.name, i.Name, err)
			}
			if i.Name != idIndex.Name || !addedID {
				done = append(done, fmt.Sprintf("collection %s: index %s was in the catalog but not in the file: made", r.name, i.Name))
			}
		}
		for _, name := range sortedKeys(indexes[r.table]) {
			if want[name] || strings.HasPrefix(name, r.table+ownIndex) {
				continue
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(`DROP INDEX %q`, name)); err != nil {
				return nil, err
			}
			done = append(done, fmt.Sprintf("collection %s: index %s, not in the catalog (its creation was cut short), dropped", r.name, strings.TrimPrefix(name, r.table+"_")))
		}
		if changed {
			b, err := json.Marshal(r.s)
			if err != nil {
				return nil, err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE "_ferretdb_collections" SET settings = ? WHERE table_name = ?`, string(b), r.table); err != nil {
				return nil, err
			}
		}
	}
	return done, nil
}

type schemaObject struct {
	kind, name, table string
	sql               bool // false for SQLite's own indexes (a UNIQUE constraint's, a primary key's)
}

func schemaObjects(ctx context.Context, tx *sql.Tx) ([]schemaObject, error) {
	rs, err := tx.QueryContext(ctx, `SELECT type, name, tbl_name, sql IS NOT NULL FROM sqlite_master WHERE type IN ('table', 'index')`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []schemaObject
	for rs.Next() {
		var o schemaObject
		if err := rs.Scan(&o.kind, &o.name, &o.table, &o.sql); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rs.Err()
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
