// Package pagekit is the frame of the plain pages the service shows people
// (the OAuth sign-in and consent pages, the mailbox's connect page, the
// refusals of report links): one HTML frame with a title and an alert, a
// message page, the email-and-password fields of a sign-in form, and the
// strict headers those pages carry. No script, style sheet, image or font;
// never framed; not cached.
package pagekit

import (
	"html/template"
	"net/http"
)

// frame defines "top" and "bottom" (the page around a body: .Title, and
// .Error as an alert when set), "message" (.Message under the title) and
// "credentials" (the email, with .Email filled in, and password fields of a
// sign-in form).
const frame = `{{define "top"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · Outreach</title></head><body><main>
<h1>{{.Title}}</h1>{{if .Error}}<p role="alert"><strong>{{.Error}}</strong></p>{{end}}{{end}}
{{define "bottom"}}</main></body></html>{{end}}
{{define "message"}}{{template "top" .}}<p id="message">{{.Message}}</p>{{template "bottom" .}}{{end}}
{{define "credentials"}}<p><label for="email">Email</label><br><input id="email" name="email" type="email" autocomplete="username" required value="{{.Email}}"></p>
<p><label for="password">Password</label><br><input id="password" name="password" type="password" autocomplete="current-password" required></p>{{end}}
`

// Pages returns the frame with the pages of defs (each a {{define}} using
// "top", "bottom" and "credentials"); it panics on a template error, as the
// pages are the service's own.
func Pages(name, defs string) *template.Template {
	return template.Must(template.Must(template.New(name).Parse(frame)).Parse(defs))
}

// SecureHeaders are the headers of a page whose forms post to formAction
// (a CSP source list: 'none' for a page without a form).
func SecureHeaders(w http.ResponseWriter, formAction string) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action "+formAction)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
}

// Render writes the page name of t with status code under SecureHeaders.
func Render(w http.ResponseWriter, t *template.Template, code int, name, formAction string, data any) error {
	SecureHeaders(w, formAction)
	w.WriteHeader(code)
	return t.ExecuteTemplate(w, name, data)
}
