// Package readback reads the renderings of reportrender back with the
// readers the tests hold them to: the PDF's text with a maintained
// extractor, the figures of the CSV (encoding/csv), the XLSX (excelize)
// and the HTML page (its figures table), each by its figure key. The
// renderer's tests and the service's end-to-end tests share it; the
// service itself never imports it.
package readback

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"html"
	"regexp"
	"strings"

	"github.com/ledongthuc/pdf"
	"github.com/xuri/excelize/v2"
)

// PDFText is the text of every page, a line per row of text, and the
// number of pages. The extractor decodes Latin text of the PDF's fonts (it
// keeps only the low byte of other characters: right-to-left text is read
// with poppler's pdftotext instead).
func PDFText(b []byte) (string, int, error) {
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return "", 0, err
	}
	var out strings.Builder
	for i := 1; i <= r.NumPage(); i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		rows, err := p.GetTextByRow()
		if err != nil {
			return "", 0, err
		}
		for _, row := range rows {
			for _, w := range row.Content {
				out.WriteString(w.S)
			}
			out.WriteString("\n")
		}
	}
	return out.String(), r.NumPage(), nil
}

// figureColumns are the figures table's key and value columns (section,
// name, key, value), in the CSV and the XLSX's Figures sheet.
const keyColumn, valueColumn = 2, 3

// CSVFigures reads the figures CSV: each figure's key and raw value.
func CSVFigures(b []byte) (map[string]string, error) {
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, err
	}
	return figures(rows)
}

// XLSXFigures opens the workbook and reads its Figures sheet: each
// figure's key and raw value. The caller closes the file.
func XLSXFigures(b []byte) (map[string]string, *excelize.File, error) {
	f, err := excelize.OpenReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	rows, err := f.GetRows("Figures", excelize.Options{RawCellValue: true})
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	m, err := figures(rows)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return m, f, nil
}

func figures(rows [][]string) (map[string]string, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("readback: no header row")
	}
	m := map[string]string{}
	for i, row := range rows[1:] {
		if len(row) <= valueColumn {
			return nil, fmt.Errorf("readback: row %d has %d cells", i+2, len(row))
		}
		m[row[keyColumn]] = row[valueColumn]
	}
	return m, nil
}

var htmlFigure = regexp.MustCompile(`<tr data-key="([^"]+)">.*?data-value="([^"]*)"`)

// HTMLFigures reads the page's figures table: each row's data-key and the
// data-value of its number.
func HTMLFigures(page string) map[string]string {
	m := map[string]string{}
	for _, sm := range htmlFigure.FindAllStringSubmatch(page, -1) {
		m[html.UnescapeString(sm[1])] = html.UnescapeString(sm[2])
	}
	return m
}
