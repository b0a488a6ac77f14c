package pitchsend

import (
	"errors"
	"html/template"
	"net/http"

	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/pitches"
)

// UnsubscribeHandler serves the signed unsubscribe links of pitches. A POST
// (the one-click unsubscribe of RFC 8058, which mail clients send without
// asking, or the form of the page) puts the address on the suppression
// list; a GET shows a page with that form, so a link scanner that follows
// the URL unsubscribes nobody. A link whose signature does not hold is
// refused with 403; an address already on the list writes nothing.
func UnsubscribeHandler(store *repo.Store, log zerolog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.URL.Query().Get("t")
		w.Header().Set("Cache-Control", "no-store")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			if _, err := pitches.Of(store).CheckUnsubscribeToken(r.Context(), tok); err != nil {
				http.Error(w, "This unsubscribe link is not valid.", http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			unsubscribePage.Execute(w, map[string]string{"Token": tok})
		case http.MethodPost:
			ctx := audit.WithActor(r.Context(), repo.SystemActor("unsubscribe link"))
			email, added, err := pitches.Of(store).UnsubscribeAddress(ctx, tok)
			if errors.Is(err, pitches.ErrBadUnsubscribe) {
				http.Error(w, "This unsubscribe link is not valid.", http.StatusForbidden)
				return
			}
			if err != nil {
				log.Error().Err(err).Msg("unsubscribe")
				http.Error(w, "The request could not be recorded; try again later.", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if !added {
				w.Write([]byte(email + " was already unsubscribed: you receive no pitches from us.\n"))
				return
			}
			w.Write([]byte(email + " is unsubscribed: you will receive no more pitches from us.\n"))
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

var unsubscribePage = template.Must(template.New("u").Parse(`<!doctype html>
<title>Unsubscribe</title>
<form method="post" action="?t={{.Token}}">
<p>Receive no more pitches from us?</p>
<button type="submit">Unsubscribe</button>
</form>
`))
