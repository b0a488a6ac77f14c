package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/repo"
	"outreach/repo/pipeline"
)

// BaseURLKey is where the HTTP layer leaves the base URL (scheme://host) the
// caller reached the service at, in the token's Extra: signed media URLs are
// made under it unless a public URL is configured.
const BaseURLKey = "base_url"

type baseURLKey struct{}

// withBaseURL carries the request's base URL from the call into ctx.
func withBaseURL(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if u, ok := req.Extra.TokenInfo.Extra[BaseURLKey].(string); ok && u != "" {
			return context.WithValue(ctx, baseURLKey{}, u)
		}
	}
	return ctx
}

// mediaBase is the base of signed media URLs: the configured public URL, or
// the one the caller used.
func mediaBase(ctx context.Context, s *repo.Store) (string, error) {
	if u := pipeline.Of(s).MediaOptions().PublicURL; u != "" {
		return u, nil
	}
	if u, ok := ctx.Value(baseURLKey{}).(string); ok {
		return u, nil
	}
	return "", repo.Errorf(repo.CodeFailedPrecondition, "the service does not know its public URL; the operator must set OUTREACH_PUBLIC_URL")
}

// mediaView is a media record as get_media returns it.
type mediaView struct {
	*pipeline.Media
	Coverage          *pipeline.MediaCoverage `json:"coverage"`
	DownloadURL       repo.Secret             `json:"download_url,omitzero"`
	DownloadExpiresAt *time.Time              `json:"download_expires_at,omitempty"`
	Note              string                  `json:"note,omitempty"`
}

// decodeBase64 reads standard or URL-safe base64, padded or not, ignoring
// whitespace (line-wrapped output of common encoders).
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var b []byte
		if b, err = enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, err
}

// Media is the Media group: files attached to coverage, stored in GridFS,
// moved through short-lived signed URLs on this service.
func Media(s *repo.Store) []Tool {
	type urlIn struct {
		CoverageID string `json:"coverage_id" jsonschema:"the coverage the file belongs to (UUID)"`
		Filename   string `json:"filename" jsonschema:"the file's name, e.g. interview.mp4 (no path)"`
		MimeType   string `json:"mime_type" jsonschema:"the file's MIME type, e.g. video/mp4, application/pdf; downloads are served with it"`
	}
	type attachIn struct {
		CoverageID      string         `json:"coverage_id" jsonschema:"the coverage the media belongs to (UUID); must be the one given to upload_media_url"`
		MediaID         string         `json:"media_id" jsonschema:"the media_id from upload_media_url (UUID), after the file was PUT to its upload_url"`
		Type            string         `json:"type" enum:"article_pdf,video,video_clip,audio,audio_clip,image,document" jsonschema:"what the file is"`
		Filename        *string        `json:"filename,omitempty" jsonschema:"a new file name; default the one given to upload_media_url"`
		MimeType        *string        `json:"mime_type,omitempty" jsonschema:"a new MIME type; default the one given to upload_media_url"`
		SizeBytes       *int64         `json:"size_bytes,omitempty" jsonschema:"the file's size in bytes, checked against what was stored (a mismatch is refused)"`
		DurationSeconds *float64       `json:"duration_seconds,omitempty" jsonschema:"length of audio or video, in seconds"`
		Metadata        map[string]any `json:"metadata,omitempty" jsonschema:"free-form facts about the file (object), e.g. {\"resolution\": \"1080p\"}; keys may not start with $ or contain ."`
	}
	type inlineIn struct {
		CoverageID    string `json:"coverage_id" jsonschema:"the coverage the file belongs to (UUID)"`
		Type          string `json:"type" enum:"article_pdf,video,video_clip,audio,audio_clip,image,document" jsonschema:"what the file is"`
		Filename      string `json:"filename" jsonschema:"the file's name (no path)"`
		MimeType      string `json:"mime_type" jsonschema:"the file's MIME type, e.g. image/png"`
		ContentBase64 string `json:"content_base64" max:"media_base64" jsonschema:"the file's bytes in base64; at most 512 KiB decoded (use upload_media_url above that)"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the media's id (UUID)"`
	}
	type listIn struct {
		CoverageID      string `json:"coverage_id,omitempty" jsonschema:"only media of this coverage (UUID)"`
		Type            string `json:"type,omitempty" enum:"article_pdf,video,video_clip,audio,audio_clip,image,document" jsonschema:"only media of this type"`
		IncludeArchived bool   `json:"include_archived,omitempty" jsonschema:"include archived media; default false"`
		Limit           *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum results; default 50"`
		Offset          *int   `json:"offset,omitempty" min:"0" jsonschema:"results to skip; default 0"`
	}
	return []Tool{
		withReplay(newTool("upload_media_url", "Start a file upload for coverage: returns media_id and a short-lived, single-use upload_url on this service. PUT the file's bytes to upload_url (e.g. curl -T FILE 'URL'), then call attach_media with the media_id. For files up to 512 KiB, upload_media takes the bytes inline instead.", create,
			func(ctx context.Context, in *urlIn) (any, error) {
				if err := checkUUID("coverage_id", in.CoverageID); err != nil {
					return nil, err
				}
				base, err := mediaBase(ctx, s)
				if err != nil {
					return nil, err
				}
				exp := pipeline.Of(s).MediaURLExpiry()
				m, err := pipeline.Of(s).CreatePendingMedia(ctx, in.CoverageID, in.Filename, in.MimeType, exp)
				if err != nil {
					return nil, err
				}
				u, err := pipeline.Of(s).SignMediaURL(ctx, base, m.ID, pipeline.MediaUpload, exp)
				if err != nil {
					return nil, err
				}
				return uploadResult(s, m.ID, u, exp, in.Filename), nil
			}), replayUpload(s)),
		newTool("attach_media", "Record the metadata of a file uploaded through upload_media_url: its type, and optionally a new filename or MIME type, size_bytes (checked against the stored size), duration_seconds and free-form metadata. Calling it again updates the metadata.", change,
			func(ctx context.Context, in *attachIn) (any, error) {
				if err := checkUUID("coverage_id", in.CoverageID); err != nil {
					return nil, err
				}
				if err := checkUUID("media_id", in.MediaID); err != nil {
					return nil, err
				}
				if err := checkEnum("type", in.Type, pipeline.MediaTypes); err != nil {
					return nil, err
				}
				if in.SizeBytes != nil && *in.SizeBytes < 0 {
					return nil, repo.Invalid("size_bytes", "must be 0 or more")
				}
				return pipeline.Of(s).AttachMedia(ctx, pipeline.AttachInput{CoverageID: in.CoverageID, MediaID: in.MediaID, Type: in.Type, Filename: in.Filename,
					MimeType: in.MimeType, SizeBytes: in.SizeBytes, DurationSeconds: in.DurationSeconds, Metadata: in.Metadata})
			}),
		newTool("upload_media", "Attach a small file (at most 512 KiB) to coverage in one call, its bytes inline in base64. Larger files: upload_media_url.", create,
			func(ctx context.Context, in *inlineIn) (any, error) {
				if err := checkUUID("coverage_id", in.CoverageID); err != nil {
					return nil, err
				}
				if err := checkEnum("type", in.Type, pipeline.MediaTypes); err != nil {
					return nil, err
				}
				// An oversized payload was refused before decoding: content_base64's
				// limit is the base64 of the inline cap (limits.go).
				data, err := decodeBase64(in.ContentBase64)
				if err != nil {
					return nil, repo.Invalid("content_base64", "is not valid base64 (standard or URL-safe alphabet): %v", err)
				}
				return pipeline.Of(s).CreateInlineMedia(ctx, pipeline.InlineInput{CoverageID: in.CoverageID, Type: in.Type, Filename: in.Filename, MimeType: in.MimeType, Data: data})
			}),
		newTool("get_media", "One media record: its metadata, its coverage, and a short-lived signed download_url that serves the bytes with the stored MIME type (no Authorization header needed).", read,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				m, cov, err := pipeline.Of(s).Media(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				v := mediaView{Media: m, Coverage: cov}
				switch {
				case m.Archived():
					v.Note = "archived: restore_media to download it again"
				case m.State == pipeline.MediaPendingUpload:
					v.Note = "no bytes yet: PUT the file to the upload_url from upload_media_url, or ask for a new URL if it expired"
				default:
					base, err := mediaBase(ctx, s)
					if err != nil {
						return nil, err
					}
					exp := pipeline.Of(s).MediaURLExpiry()
					u, err := pipeline.Of(s).SignMediaURL(ctx, base, m.ID, pipeline.MediaDownload, exp)
					if err != nil {
						return nil, err
					}
					v.DownloadURL = u
					v.DownloadExpiresAt = &exp
				}
				return v, nil
			}),
		newTool("list_media", "List media newest first, each with its state (pending_upload, uploaded, attached), type, file name, MIME type, size and SHA-256. get_media gives a download URL.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				if in.CoverageID != "" {
					if err := checkUUID("coverage_id", in.CoverageID); err != nil {
						return nil, err
					}
				}
				if in.Type != "" {
					if err := checkEnum("type", in.Type, pipeline.MediaTypes); err != nil {
						return nil, err
					}
				}
				p, err := pipeline.Of(s).ListMedia(ctx, pipeline.MediaFilter{CoverageID: in.CoverageID, Type: in.Type, IncludeArchived: in.IncludeArchived}, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("media", p, limit, offset), nil
			}),
		newTool("archive_media", "Archive a media record (soft delete): it leaves lists and cannot be downloaded until restored. The stored bytes are kept.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).ArchiveMedia(ctx, in.ID)
			}),
		newTool("restore_media", "Restore an archived media record.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).RestoreMedia(ctx, in.ID)
			}),
	}
}

// uploadResult is upload_media_url's result. The upload URL is a secret
// (whoever holds it may store a file), in upload_url and in the curl line of
// the instructions; where the result is kept, both hold the URL without its
// signature.
func uploadResult(s *repo.Store, id string, u repo.Secret, exp time.Time, filename string) map[string]any {
	instructions := func(url string) string {
		return fmt.Sprintf("PUT the file's bytes as the request body to upload_url before expires_at, e.g. curl -T %s '%s'. "+
			"The URL works for one successful upload; the file may be at most %d bytes. No Authorization header is needed: the URL is the permission. "+
			"The answer gives size_bytes and sha256. Then call attach_media with coverage_id, media_id %s and type (one of %s).",
			shellQuoteName(filename), url, pipeline.Of(s).MediaOptions().MaxBytes, id, strings.Join(pipeline.MediaTypes, ", "))
	}
	return map[string]any{"media_id": id, "upload_url": u, "expires_at": exp.Format(time.RFC3339),
		"instructions": repo.NewSecret(instructions(u.Reveal()), instructions(u.Kept()))}
}

// replayUpload answers a replay of upload_media_url: the same media and
// expiry, and the URL signed again (a signature is a function of the media
// id, the action and the expiry, so it is derived, never stored). The
// expiry is the first call's: a replay does not extend it.
func replayUpload(s *repo.Store) func(context.Context, json.RawMessage, []byte) (any, error) {
	return func(ctx context.Context, args json.RawMessage, kept []byte) (any, error) {
		var first struct {
			MediaID   string `json:"media_id"`
			UploadURL string `json:"upload_url"`
			ExpiresAt string `json:"expires_at"`
		}
		var in struct {
			Filename string `json:"filename"`
		}
		if err := json.Unmarshal(kept, &first); err != nil {
			return nil, fmt.Errorf("replay upload_media_url: %w", err)
		}
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, fmt.Errorf("replay upload_media_url: %w", err)
		}
		exp, err := time.Parse(time.RFC3339, first.ExpiresAt)
		if err != nil {
			return nil, fmt.Errorf("replay upload_media_url: %w", err)
		}
		base, _, ok := strings.Cut(first.UploadURL, "/media/"+first.MediaID+"/")
		if !ok {
			return nil, fmt.Errorf("replay upload_media_url: the kept URL %q does not name media %s", first.UploadURL, first.MediaID)
		}
		u, err := pipeline.Of(s).SignMediaURL(ctx, base, first.MediaID, pipeline.MediaUpload, exp)
		if err != nil {
			return nil, err
		}
		return uploadResult(s, first.MediaID, u, exp, in.Filename), nil
	}
}

// withReplay gives t a replay function (see Tool.replay).
func withReplay(t Tool, replay func(context.Context, json.RawMessage, []byte) (any, error)) Tool {
	t.replay = replay
	return t
}

// shellQuoteName quotes a file name for the curl example.
func shellQuoteName(name string) string {
	return "'" + strings.ReplaceAll(name, "'", `'\''`) + "'"
}
