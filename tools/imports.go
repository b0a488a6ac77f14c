package tools

import (
	"context"
	"encoding/csv"
	"errors"
	"io"
	"slices"
	"strings"

	"outreach/repo"
	"outreach/repo/directory"
)

// Imports is the Imports group: contacts and outlets in bulk, from JSON rows
// or CSV text, matched on natural keys, with a dry run.
func Imports(s *repo.Store) []Tool {
	type importIn struct {
		Rows    []map[string]any `json:"rows,omitempty" max:"10000" jsonschema:"the rows as JSON objects, field name to value (at most 10000); give rows or csv"`
		CSV     string           `json:"csv,omitempty" max:"2000000" jsonschema:"the rows as CSV text: a header line of field names, then one line per row; lists (beats, topics) separated by ';'; give rows or csv"`
		DryRun  bool             `json:"dry_run,omitempty" jsonschema:"true: report per row what would be created, updated, left unchanged or refused, and write nothing"`
		Confirm bool             `json:"confirm,omitempty" jsonschema:"true when the user already agreed to this step: no confirmation is asked"`
	}
	run := func(fields []string, imp func(context.Context, []directory.ImportRow, bool, directory.Progress) (*directory.ImportResult, error)) func(context.Context, *importIn) (any, error) {
		return func(ctx context.Context, in *importIn) (any, error) {
			rows, err := importRows(in.Rows, in.CSV, fields)
			if err != nil {
				return nil, err
			}
			return imp(ctx, rows, in.DryRun, func(done, total int, msg string) { Progress(ctx, done, total, msg) })
		}
	}
	const common = " Rows match existing active records on their natural key and update only the fields they give (a field left out, null or empty is never cleared), so running the same import again changes nothing. A row is refused, with its reason, when it lacks the key, repeats a key of an earlier row, or has a bad value; the other rows go ahead. dry_run: true reports the same per-row outcome and writes nothing. A real run writes in batches, all in the caller's session, so one rollback_session undoes the import; it sends progress notifications when the call has a progress token."
	return []Tool{
		newTool("import_contacts", "Import contacts in bulk (up to 10000 rows), matched on email (case-insensitive). Fields: "+strings.Join(directory.ContactFieldNames, ", ")+"; email is required, first_name and last_name for a new contact. Clearing do_not_contact needs the admin scope."+common, change,
			run(directory.ContactFieldNames, directory.Of(s).ImportContacts)),
		newTool("import_outlets", "Import outlets in bulk (up to 10000 rows), matched on the website's domain (lower case, without www.). Fields: "+strings.Join(directory.OutletFieldNames, ", ")+"; website is required (a bare domain is read as https), name for a new outlet."+common, change,
			run(directory.OutletFieldNames, directory.Of(s).ImportOutlets)),
	}
}

// importRows returns the rows of rows or csvText (exactly one given). A CSV
// header naming an unknown field is refused whole; its empty cells are
// left out of the row.
func importRows(rows []map[string]any, csvText string, fields []string) ([]directory.ImportRow, error) {
	switch {
	case rows != nil && csvText != "":
		return nil, repo.Invalid("csv", "give rows or csv, not both")
	case rows != nil:
		out := make([]directory.ImportRow, len(rows))
		for i, r := range rows {
			out[i] = directory.ImportRow(r)
		}
		return out, nil
	case strings.TrimSpace(csvText) == "":
		return nil, repo.Invalid("rows", "give the rows as JSON (rows) or as CSV text (csv)")
	}
	r := csv.NewReader(strings.NewReader(csvText))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	header, err := r.Read()
	if err != nil {
		return nil, repo.Invalid("csv", "the header line could not be read: %v", err)
	}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if !slices.Contains(fields, h) {
			return nil, repo.Invalid("csv", "column %d of the header is %q, which is not a field; the fields are: %s", i+1, h, strings.Join(fields, ", "))
		}
		if slices.Contains(header[:i], h) {
			return nil, repo.Invalid("csv", "column %q appears twice in the header", h)
		}
		header[i] = h
	}
	var out []directory.ImportRow
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, repo.Invalid("csv", "%v", err)
		}
		if len(out) >= directory.MaxImportRows {
			return nil, repo.Invalid("csv", "has more than %d rows; split the file", directory.MaxImportRows)
		}
		row := directory.ImportRow{}
		for i, v := range rec {
			if i >= len(header) {
				return nil, repo.Invalid("csv", "row %d has %d cells, the header %d", len(out)+1, len(rec), len(header))
			}
			if v = strings.TrimSpace(v); v != "" {
				row[header[i]] = v
			}
		}
		out = append(out, row)
	}
	return out, nil
}
