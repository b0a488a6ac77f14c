package reportrender_test

import (
	"io"
	"testing"

	"outreach/reportrender"
)

// BenchmarkRender renders a report of 25,000 clips (a year of the growth
// bench's largest size) in each format; the bench package measures the
// tools end to end.
func BenchmarkRender(b *testing.B) {
	d := sample(25000)
	for _, f := range []string{"html", "pdf", "xlsx", "png", "csv"} {
		b.Run(f, func(b *testing.B) {
			for b.Loop() {
				var err error
				switch f {
				case "html":
					err = d.HTML(io.Discard)
				case "pdf":
					err = d.PDF(io.Discard, "A4")
				case "xlsx":
					err = d.XLSX(io.Discard)
				case "png":
					_, err = d.PNG("trend", reportrender.PNGWidth, reportrender.PNGHeight)
				case "csv":
					err = d.CSV(io.Discard, "clips")
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
