package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"outreach/repo"
	"outreach/repo/pipeline"
)

// mountMedia adds the signed media URLs: PUT /media/{id}/upload streams a
// file into GridFS, GET /media/{id}/download serves it. The URL's signature
// is the permission (no bearer key): tools hand the URLs out to callers that
// have one.
//
// Refusals: 403 a missing, malformed or wrong signature (forged or altered
// URL); 410 an expired URL, or an upload URL already used; 413 a file over
// the size cap; 404 an unknown media id; 409 archived media, or media
// without bytes yet. Bodies of refusals are the tools' error model,
// {"error": {code, message, retryable}}.
func mountMedia(mux *http.ServeMux, store *repo.Store, log zerolog.Logger) {
	mux.HandleFunc("PUT /media/{id}/upload", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.PathValue("id")
		m, status, err := upload(w, r, store, id)
		ev := log.Info()
		if status >= 500 {
			ev = log.Error().Err(err)
		}
		ev.Str("media_id", id).Int("status", status).Int64("duration_ms", time.Since(start).Milliseconds()).Msg("media upload")
		if err != nil {
			mediaError(w, status, err, store)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"media_id": m.ID, "state": m.State, "size_bytes": m.SizeBytes, "sha256": m.SHA256,
			"next": "call attach_media with coverage_id " + m.CoverageID + ", media_id " + m.ID + " and the media type"})
	})
	mux.HandleFunc("GET /media/{id}/download", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.PathValue("id")
		status, n, sent, err := download(w, r, store, id)
		ev := log.Info()
		if status >= 500 {
			ev = log.Error().Err(err)
		}
		ev.Str("media_id", id).Int("status", status).Int64("bytes", n).Int64("duration_ms", time.Since(start).Milliseconds()).Msg("media download")
		if err != nil && !sent {
			mediaError(w, status, err, store)
		}
	})
}

func upload(w http.ResponseWriter, r *http.Request, store *repo.Store, id string) (*pipeline.Media, int, error) {
	q := r.URL.Query()
	if err := pipeline.Of(store).CheckMediaURL(r.Context(), id, pipeline.MediaUpload, q.Get("expires"), q.Get("signature")); err != nil {
		return nil, mediaStatus(err), err
	}
	max := pipeline.Of(store).MediaOptions().MaxBytes
	if r.ContentLength > max {
		w.Header().Set("Connection", "close") // do not read the rest of a body we refuse
		return nil, http.StatusRequestEntityTooLarge, pipeline.ErrMediaTooLarge
	}
	if r.ContentLength == 0 {
		return nil, http.StatusBadRequest, repo.Invalid("body", "the upload is empty; PUT the file's bytes as the request body")
	}
	m, err := pipeline.Of(store).UploadMedia(r.Context(), id, r.Body)
	if err != nil {
		if errors.Is(err, pipeline.ErrMediaTooLarge) {
			w.Header().Set("Connection", "close")
		}
		return nil, mediaStatus(err), err
	}
	return m, http.StatusOK, nil
}

// download serves the bytes; sent reports whether the headers went out.
func download(w http.ResponseWriter, r *http.Request, store *repo.Store, id string) (status int, n int64, sent bool, err error) {
	q := r.URL.Query()
	ctx := r.Context()
	if err = pipeline.Of(store).CheckMediaURL(ctx, id, pipeline.MediaDownload, q.Get("expires"), q.Get("signature")); err != nil {
		return mediaStatus(err), 0, false, err
	}
	m, _, err := pipeline.Of(store).Media(ctx, id)
	if err != nil {
		return mediaStatus(err), 0, false, err
	}
	if m.Archived() {
		err = repo.Errorf(repo.CodeFailedPrecondition, "media %s is archived; restore_media it to download it", id)
		return mediaStatus(err), 0, false, err
	}
	body, err := pipeline.Of(store).OpenMediaBytes(ctx, m)
	if err != nil {
		return mediaStatus(err), 0, false, err
	}
	defer body.Close()
	h := w.Header()
	h.Set("Content-Type", m.MimeType)
	if m.SizeBytes != nil {
		h.Set("Content-Length", strconv.FormatInt(*m.SizeBytes, 10))
	}
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": m.Filename}))
	h.Set("ETag", `"`+m.SHA256+`"`)
	// The bytes are whatever was uploaded: never let a browser run them in this origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return http.StatusOK, 0, true, nil
	}
	n, err = io.Copy(w, body)
	if err != nil {
		// Headers are sent: the short body (against Content-Length) tells the client.
		return http.StatusInternalServerError, n, true, fmt.Errorf("media %s: download cut after %d bytes: %w", id, n, err)
	}
	return http.StatusOK, n, true, nil
}

// mediaStatus maps a refusal to its HTTP status.
func mediaStatus(err error) int {
	switch {
	case errors.Is(err, pipeline.ErrMediaURLInvalid):
		return http.StatusForbidden
	case errors.Is(err, pipeline.ErrMediaURLExpired), errors.Is(err, pipeline.ErrMediaURLUsed):
		return http.StatusGone
	case errors.Is(err, pipeline.ErrMediaTooLarge):
		return http.StatusRequestEntityTooLarge
	}
	switch repo.ErrorCode(err) {
	case repo.CodeNotFound:
		return http.StatusNotFound
	case repo.CodeFailedPrecondition, repo.CodeConflict:
		return http.StatusConflict
	case repo.CodeInvalid:
		return http.StatusBadRequest
	case repo.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func mediaError(w http.ResponseWriter, status int, err error, store *repo.Store) {
	e := repo.AsError(err)
	if errors.Is(err, pipeline.ErrMediaTooLarge) {
		e = &repo.Error{Code: repo.CodeInvalid, Message: fmt.Sprintf("the file is larger than the upload size cap of %d bytes", pipeline.Of(store).MediaOptions().MaxBytes)}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}

// requestBaseURL is the scheme and host the caller reached the service at:
// the connection's, or those a trusted proxy forwarded (see Config). The
// public URL, when set, comes before it (Config.baseURL).
func requestBaseURL(r *http.Request) string {
	o := originOf(r)
	return o.scheme + "://" + o.host
}
