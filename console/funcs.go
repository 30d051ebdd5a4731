package console

import (
	"html/template"
	"time"
)

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"money":          money,
	"readOnlyNotice": func() string { return ReadOnlyNotice },
	"scopes":         scopeText,
	"span":           span,
	"when":           when,
}

// when formats a time for a page, in UTC to the second; "" for the zero
// time.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}
