package reportrender

import (
	"encoding/csv"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/xuri/excelize/v2"
)

// CSV writes one table (TableNames) as RFC 4180 CSV with a header row.
// Text that a spreadsheet would take for a formula (starting with = + - @,
// a tab or a carriage return) is written with a leading apostrophe, the
// usual guard against formula injection; numbers are plain digits with a
// point, dates RFC 3339 in UTC.
func (d *Document) CSV(w io.Writer, table string) error {
	t, ok := d.Table(table)
	if !ok {
		return fmt.Errorf("reportrender: no table %q", table)
	}
	cw := csv.NewWriter(w)
	head := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		head[i] = c.Name
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	row := make([]string, len(t.Columns))
	for _, r := range t.Rows {
		for i, v := range r {
			row[i] = cellText(v)
			if s, ok := v.(string); ok {
				row[i] = SafeText(s)
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// SafeText is s as CSV writes a text cell.
func SafeText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// sheetName is a table's sheet in the workbook.
func sheetName(table string) string { return strings.ToUpper(table[:1]) + table[1:] }

// XLSX writes the workbook: one sheet per table (Figures first), typed
// cells (numbers as numbers, dates as dates, text as text: never a
// formula), a header row kept in view.
func (d *Document) XLSX(w io.Writer) error {
	f := excelize.NewFile()
	defer f.Close()
	dateStyle, err := f.NewStyle(&excelize.Style{NumFmt: 22}) // m/d/yy h:mm, shown in the reader's locale
	if err != nil {
		return err
	}
	head, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}})
	if err != nil {
		return err
	}
	for i, t := range d.Tables() {
		name := sheetName(t.Name)
		if i == 0 {
			if err := f.SetSheetName("Sheet1", name); err != nil {
				return err
			}
		} else if _, err := f.NewSheet(name); err != nil {
			return err
		}
		sw, err := f.NewStreamWriter(name)
		if err != nil {
			return err
		}
		if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
			return err
		}
		for ci, c := range t.Columns {
			width := 14.0
			switch c.Name {
			case "headline", "opportunity", "url":
				width = 60
			case "figure", "key", "outlet", "journalists":
				width = 28
			}
			if err := sw.SetColWidth(ci+1, ci+1, width); err != nil {
				return err
			}
		}
		cells := make([]any, len(t.Columns))
		for ci, c := range t.Columns {
			cells[ci] = excelize.Cell{StyleID: head, Value: c.Name}
		}
		if err := sw.SetRow("A1", cells); err != nil {
			return err
		}
		for ri, r := range t.Rows {
			cells := make([]any, len(r))
			for ci, v := range r {
				switch x := v.(type) {
				case time.Time:
					cells[ci] = excelize.Cell{StyleID: dateStyle, Value: x.UTC()}
				case string:
					cells[ci] = excelize.Cell{Value: x}
				default:
					cells[ci] = v
				}
			}
			cell, _ := excelize.CoordinatesToCellName(1, ri+2)
			if err := sw.SetRow(cell, cells); err != nil {
				return err
			}
		}
		if err := sw.Flush(); err != nil {
			return err
		}
	}
	_, err = f.WriteTo(w)
	return err
}
