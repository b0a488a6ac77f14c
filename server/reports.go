package server

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"outreach/internal/pagekit"
	"outreach/repo"
	"outreach/repo/reports"
	"outreach/reportrender"
	"outreach/tools"
)

// mountReports adds the two routes of rendered reports, both reached
// without a bearer key (their signature is the permission; the tools hand
// them out to callers that have a key):
//
//   - GET /reports/render?…&e=&s= serves a rendering render_report was too
//     large to answer inline, for 15 minutes after the call: the rendering
//     the call made, kept in memory (reportrender.Keep), or, when this
//     instance does not keep it, the report computed again;
//   - GET /shared/{id}?e=&s= serves a shared report's page from its
//     snapshot, and counts the view.
//
// A forged or altered link answers 403, an expired, revoked or rolled-back
// one 410, each with a plain page; neither reaches anything else of the
// store. Both routes share a budget of requests per client address
// (limits.Pages; the address a trusted proxy forwarded, an IPv6 client's
// /64): over it, 429 with Retry-After and a plain page, before any read.
func mountReports(mux *http.ServeMux, store *repo.Store, log zerolog.Logger, limits tools.RateLimits) {
	pages := tools.NewLimiter(limits.Pages, limits.PageBurst)
	mux.HandleFunc("GET "+reports.RenderPath, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if !allowPage(w, r, pages, limits, log) {
			return
		}
		status, n, err := renderDownload(w, r, store)
		ev := log.Info()
		if status >= 500 {
			ev = log.Error().Err(err)
		}
		ev.Int("status", status).Int("bytes", n).Int64("duration_ms", time.Since(start).Milliseconds()).Msg("report download")
	})
	mux.HandleFunc("GET "+reports.SharePath+"{id}", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.PathValue("id")
		if !allowPage(w, r, pages, limits, log) {
			return
		}
		status, err := sharedPage(w, r, store, id, log)
		ev := log.Info()
		if status >= 500 {
			ev = log.Error().Err(err)
		}
		ev.Str("shared_report_id", id).Int("status", status).Int64("duration_ms", time.Since(start).Milliseconds()).Msg("shared report view")
	})
}

// pageClient is the key of a page's budget: the client's address, an IPv6
// one's /64 (what one subscriber holds).
func pageClient(r *http.Request) string {
	a, err := netip.ParseAddr(ClientIP(r))
	if err != nil {
		return ClientIP(r)
	}
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// allowPage takes a request from the client's budget, or answers 429 with
// Retry-After (whole seconds) and a plain page.
func allowPage(w http.ResponseWriter, r *http.Request, l *tools.Limiter, limits tools.RateLimits, log zerolog.Logger) bool {
	wait, ok := l.Take(pageClient(r))
	if ok {
		return true
	}
	secs := max(int(math.Ceil(wait.Seconds())), 1)
	pageHeaders(w, "text/html; charset=utf-8")
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	w.WriteHeader(http.StatusTooManyRequests)
	_ = refusalPage.ExecuteTemplate(w, "message", map[string]string{"Title": "Too many requests",
		"Message": fmt.Sprintf("This address opened report links more than %g times a second (bursts of %d). Try again in %d s.", limits.Pages, limits.PageBurst, secs)})
	log.Info().Str("client", ClientIP(r)).Str("path", r.URL.Path).Int("status", http.StatusTooManyRequests).Msg("report page refused: rate limit")
	return false
}

// pageHeaders are the headers of every page and download of this file:
// nothing loads, runs or frames, and no referrer leaves.
func pageHeaders(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Content-Security-Policy", reportrender.CSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Content-Type", contentType)
}

// refusalPage is the plain page of a refused link: pagekit's message,
// under the report pages' own headers.
var refusalPage = pagekit.Pages("refusal", "")

// refuse answers a refused link with a plain page.
func refuse(w http.ResponseWriter, err error) int {
	status, title, msg := http.StatusInternalServerError, "Something went wrong", "The report could not be shown; try again later."
	switch {
	case errors.Is(err, reports.ErrShareInvalid):
		status, title, msg = http.StatusForbidden, "This link is not valid", "The link is incomplete or was altered. Use the link exactly as it was sent to you."
	case errors.Is(err, reports.ErrShareGone):
		status, title, msg = http.StatusGone, "This link no longer works", "It has expired or was revoked. Ask the person who sent it for a new one."
	case repo.ErrorCode(err) == repo.CodeInvalid, repo.ErrorCode(err) == repo.CodeNotFound, repo.ErrorCode(err) == repo.CodeFailedPrecondition:
		status, title, msg = http.StatusConflict, "This report cannot be made", repo.AsError(err).Message
	}
	pageHeaders(w, "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = refusalPage.ExecuteTemplate(w, "message", map[string]string{"Title": title, "Message": msg})
	return status
}

func renderDownload(w http.ResponseWriter, r *http.Request, store *repo.Store) (int, int, error) {
	ctx := r.Context()
	q := r.URL.Query()
	if err := reports.Of(store).CheckRenderURL(ctx, q); err != nil {
		return refuse(w, err), 0, err
	}
	rq, sp, err := reportrender.ParseParams(q)
	if err != nil {
		return refuse(w, err), 0, err
	}
	out, ok := reportrender.Kept(q.Get("s"))
	if !ok { // not kept by this instance: rendered again, with the figures of now
		snap, err := reports.Of(store).Compute(ctx, rq)
		if err != nil {
			return refuse(w, err), 0, err
		}
		if out, err = reportrender.Render(reportrender.FromSnapshot(snap, nil), sp); err != nil {
			return refuse(w, err), 0, err
		}
	}
	pageHeaders(w, out.MimeType)
	disposition := "attachment"
	if sp.Format == "html" || sp.Format == "png" {
		disposition = "inline"
	}
	w.Header().Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": out.Filename}))
	w.Header().Set("Content-Length", strconv.Itoa(len(out.Bytes)))
	w.WriteHeader(http.StatusOK)
	n, err := w.Write(out.Bytes)
	return http.StatusOK, n, err
}

func sharedPage(w http.ResponseWriter, r *http.Request, store *repo.Store, id string, log zerolog.Logger) (int, error) {
	ctx := r.Context()
	q := r.URL.Query()
	shared, err := reports.Of(store).OpenShared(ctx, id, q.Get("e"), q.Get("s"))
	if err != nil {
		return refuse(w, err), err
	}
	snap, err := shared.LoadSnapshot()
	if err != nil {
		return refuse(w, err), err
	}
	var b bytes.Buffer
	if err := reportrender.FromSnapshot(snap, &shared.SharedAt).HTML(&b); err != nil {
		return refuse(w, err), err
	}
	pageHeaders(w, "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return http.StatusOK, nil
	}
	_, _ = w.Write(b.Bytes())
	// The view is counted after the page went out: a failure to count is
	// logged, never shown to the reader.
	if err := reports.Of(store).CountView(ctx, id); err != nil {
		log.Warn().Err(err).Str("shared_report_id", id).Msg("shared report view not counted")
	}
	return http.StatusOK, nil
}
