// Package report renders a load-test result as one self-contained HTML file
// that opens offline: the uPlot library, its stylesheet, the report script
// and the result data are all inlined, and nothing is fetched.
//
// The report script sets document.body.dataset.rendered to the number of
// charts it drew, which tests and tools can wait for.
package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"strings"
)

var (
	//go:embed assets/uPlot.iife.min.js
	uplotJS string
	//go:embed assets/uPlot.min.css
	uplotCSS string
	//go:embed template.html
	page string
	//go:embed report.css
	style string
	//go:embed report.js
	script string
)

// Write renders the JSON result data as an HTML report to w. The data is
// embedded as a JSON script element with <, > and & escaped, so no value
// in it can close the element.
func Write(w io.Writer, data []byte) error {
	if !json.Valid(data) {
		return errors.New("report: result is not valid JSON")
	}
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, data)
	title := "surgepay load test"
	var head struct {
		StartedAt string `json:"started_at"`
		Config    struct {
			Profile string `json:"profile"`
		} `json:"config"`
	}
	if json.Unmarshal(data, &head) == nil && head.StartedAt != "" {
		title = fmt.Sprintf("surgepay load test: %s, %s", head.Config.Profile, head.StartedAt)
	}
	r := strings.NewReplacer(
		"{{TITLE}}", html.EscapeString(title),
		"{{UPLOT_CSS}}", uplotCSS,
		"{{STYLE}}", style,
		"{{UPLOT_JS}}", uplotJS,
		"{{DATA}}", escaped.String(),
		"{{SCRIPT}}", script,
	)
	_, err := r.WriteString(w, page)
	return err
}
