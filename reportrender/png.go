package reportrender

import (
	"fmt"

	"github.com/go-analyze/charts"
)

// PNG draws one chart (ChartIDs) as a PNG image, width × height pixels,
// with go-analyze/charts. An empty report has no chart: ErrNoChart.
func (d *Document) PNG(chartID string, width, height int) ([]byte, error) {
	var c *Chart
	for _, x := range d.Charts() {
		if x.ID == chartID {
			c = &x
			break
		}
	}
	if c == nil {
		if d.Empty() {
			return nil, ErrNoChart
		}
		return nil, fmt.Errorf("reportrender: no chart %q", chartID)
	}
	labels := make([]string, len(c.Points))
	values := make([]float64, len(c.Points))
	for i, p := range c.Points {
		labels[i] = clip(p.Label, 24)
		values[i] = p.Value
	}
	opts := []charts.OptionFunc{charts.PNGOutputOptionFunc(), charts.DimensionsOptionFunc(width, height),
		charts.TitleTextOptionFunc(c.Title), charts.PaddingOptionFunc(charts.NewBoxEqual(16)), charts.SeriesShowLabel(len(c.Points) <= 16)}
	var p *charts.Painter
	var err error
	switch {
	case c.Line:
		p, err = charts.LineRender([][]float64{values}, append(opts, charts.XAxisLabelsOptionFunc(labels))...)
	case c.Horizontal:
		p, err = charts.HorizontalBarRender([][]float64{values}, append(opts, charts.YAxisLabelsOptionFunc(labels))...)
	default:
		p, err = charts.BarRender([][]float64{values}, append(opts, charts.XAxisLabelsOptionFunc(labels))...)
	}
	if err != nil {
		return nil, err
	}
	return p.Bytes()
}

// ErrNoChart is the PNG of an empty report.
var ErrNoChart = fmt.Errorf("the report is empty: there is no chart to draw")
