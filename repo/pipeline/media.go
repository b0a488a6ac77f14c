package pipeline

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
)

// MediaTypes are the allowed media types.
var MediaTypes = []string{"article_pdf", "video", "video_clip", "audio", "audio_clip", "image", "document"}

// States of a media record. A record made by upload_media_url waits for its
// bytes (pending_upload); the signed PUT stores them (uploaded);
// attach_media records the metadata (attached). upload_media goes straight
// to attached.
const (
	MediaPendingUpload = "pending_upload"
	MediaUploaded      = "uploaded"
	MediaAttached      = "attached"
)

// Media is a file attached to coverage. Its bytes are a GridFS file (FileID)
// written once and never changed; the record holds what is known about them.
type Media struct {
	repo.Meta       `bson:",inline"`
	CoverageID      string         `bson:"coverage_id" json:"coverage_id"`
	State           string         `bson:"state" json:"state"`
	Type            string         `bson:"type,omitempty" json:"type,omitempty"`
	Filename        string         `bson:"filename" json:"filename"`
	MimeType        string         `bson:"mime_type" json:"mime_type"`
	SizeBytes       *int64         `bson:"size_bytes,omitempty" json:"size_bytes,omitempty"`
	SHA256          string         `bson:"sha256,omitempty" json:"sha256,omitempty"`
	DurationSeconds *float64       `bson:"duration_seconds,omitempty" json:"duration_seconds,omitempty"`
	Metadata        map[string]any `bson:"metadata,omitempty" json:"metadata,omitempty"`
	UploadExpiresAt *time.Time     `bson:"upload_expires_at,omitempty" json:"upload_expires_at,omitempty"`
	UploadedAt      *time.Time     `bson:"uploaded_at,omitempty" json:"uploaded_at,omitempty"`
	AttachedAt      *time.Time     `bson:"attached_at,omitempty" json:"attached_at,omitempty"`
	// FileID names the GridFS file (fs.files _id) holding the bytes.
	FileID string `bson:"file_id,omitempty" json:"-"`
}

// Errors of signed media URLs, told apart by the HTTP edge (errors.Is).
var (
	ErrMediaURLInvalid = &repo.Error{Code: repo.CodePermissionDenied, Message: "the media URL's signature is missing, malformed or wrong; use the URL exactly as given, or ask for a new one (upload_media_url, get_media)"}
	ErrMediaURLExpired = &repo.Error{Code: repo.CodeFailedPrecondition, Message: "the media URL has expired; ask for a new one (upload_media_url for an upload, get_media for a download)"}
	ErrMediaURLUsed    = &repo.Error{Code: repo.CodeFailedPrecondition, Message: "this upload URL has already been used: the file is stored; call attach_media, or upload_media_url again for another file"}
	ErrMediaTooLarge   = &repo.Error{Code: repo.CodeInvalid, Message: "the file is larger than the upload size cap"}
)

// checkFilename refuses names that are empty, overlong, or carry control
// characters or path separators (they end up in Content-Disposition).
func checkFilename(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return repo.Invalid("filename", "must not be empty")
	case len(name) > 255:
		return repo.Invalid("filename", "is %d bytes long; the maximum is 255", len(name))
	case strings.ContainsAny(name, `/\`):
		return repo.Invalid("filename", "%q must be a bare file name, without '/' or '\\'", name)
	case strings.ContainsFunc(name, unicode.IsControl):
		return repo.Invalid("filename", "must not contain control characters")
	}
	return nil
}

// checkMimeType refuses anything that is not a type/subtype media type.
func checkMimeType(t string) error {
	mt, _, err := mime.ParseMediaType(t)
	if err != nil || !strings.Contains(mt, "/") {
		return repo.Invalid("mime_type", "%q is not a MIME type; use the form type/subtype, e.g. application/pdf, video/mp4, image/jpeg", t)
	}
	return nil
}

// CreatePendingMedia starts an upload: a media record of coverageID waiting
// for its bytes until expires.
func (s *Store) CreatePendingMedia(ctx context.Context, coverageID, filename, mimeType string, expires time.Time) (*Media, error) {
	if err := checkFilename(filename); err != nil {
		return nil, err
	}
	if err := checkMimeType(mimeType); err != nil {
		return nil, err
	}
	if err := s.MustExist(ctx, repo.CollCoverage, "coverage_id", coverageID); err != nil {
		return nil, err
	}
	exp := expires.UTC().Truncate(time.Millisecond)
	m := &Media{CoverageID: coverageID, State: MediaPendingUpload, Filename: filename, MimeType: mimeType, UploadExpiresAt: &exp}
	if err := repo.Insert(ctx, s.Store, repo.CollMedia, m); err != nil {
		return nil, err
	}
	return m, nil
}

// capped reads r and fails with ErrMediaTooLarge past max bytes.
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more than the cap tells a file of exactly max bytes from a larger one.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, ErrMediaTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// storeBytes streams r (at most max bytes) into a new GridFS file for media m
// and returns the file id, the length and the SHA-256.
func (s *Store) storeBytes(ctx context.Context, m *Media, r io.Reader, max int64) (string, int64, string, error) {
	fileID := uuid.NewString()
	h := sha256.New()
	n, err := s.PutBlob(ctx, fileID, m.Filename, io.TeeReader(&capped{r: r, left: max}, h),
		bson.M{"media_id": m.ID, "coverage_id": m.CoverageID, "mime_type": m.MimeType})
	if err != nil {
		return "", n, "", err
	}
	return fileID, n, hex.EncodeToString(h.Sum(nil)), nil
}

// UploadMedia stores body as the bytes of pending media id: the PUT of a
// signed upload URL. The change is attributed to the agent session that
// asked for the URL.
//
// Nothing reaches the store before the whole body is known to fit: the body
// is first spooled to a temporary file (bounded by the cap, never held whole
// in memory), so a refused upload (over the cap, empty, cut short) leaves no
// chunk behind. Then, with the URL claimed by this call alone and checked
// still unused, the file streams into GridFS and the record moves to
// uploaded with a version-guarded write. A URL thus writes its bytes into
// the store once, whatever a holder of it retries.
func (s *Store) UploadMedia(ctx context.Context, id string, body io.Reader) (*Media, error) {
	m, err := repo.Find[*Media](ctx, s.Store, repo.CollMedia, id)
	if err != nil {
		return nil, err
	}
	if err := uploadable(m); err != nil {
		return nil, err
	}
	var created audit.Entry
	if err := s.FindOne(ctx, repo.CollChangeLog, bson.M{"collection": repo.CollMedia, "record_id": id, "action": audit.ActionCreate, "state": audit.StateApplied}).Decode(&created); err != nil {
		return nil, ledger.DriverErr(err, "media creation", id)
	}
	ctx = audit.WithActor(ctx, audit.Actor{UserID: created.UserID, AgentID: created.AgentID, SessionID: created.SessionID, Tool: "upload_media_url (PUT)"})

	key := uploadKey{s.Store, id}
	if _, busy := uploading.LoadOrStore(key, true); busy {
		return nil, ErrMediaUploadBusy
	}
	defer uploading.Delete(key)
	spool, n, err := spoolUpload(body, s.MediaOptions().MaxBytes)
	if err != nil {
		return nil, err
	}
	defer func() { spool.Close(); os.Remove(spool.Name()) }()
	if n == 0 {
		return nil, repo.Invalid("body", "the upload is empty; PUT the file's bytes as the request body")
	}
	// The URL may have been used while this body was arriving.
	if m, err = repo.Find[*Media](ctx, s.Store, repo.CollMedia, id); err != nil {
		return nil, err
	}
	if err := uploadable(m); err != nil {
		return nil, err
	}
	fileID, n, sum, err := s.storeBytes(ctx, m, spool, s.MediaOptions().MaxBytes)
	if err != nil {
		return nil, err
	}
	// The version guard makes this transition happen once on MongoDB; the
	// embedded store does not apply guarded writes atomically, so completions
	// in this process also take turns (the embedded store has one process).
	s.UploadTurns().Lock()
	defer s.UploadTurns().Unlock()
	return repo.Modify(ctx, s.Store, repo.CollMedia, id, audit.ActionUpdate, func(m *Media) error {
		if err := uploadable(m); err != nil {
			return err
		}
		t := repo.Now()
		m.State, m.FileID, m.SizeBytes, m.SHA256, m.UploadedAt, m.UploadExpiresAt = MediaUploaded, fileID, &n, sum, &t, nil
		return nil
	})
}

// ErrMediaUploadBusy refuses a second upload to a URL while one is running.
var ErrMediaUploadBusy = &repo.Error{Code: repo.CodeConflict, Retryable: true, Message: "another upload to this URL is in progress; wait for it to finish (a finished upload uses the URL up)"}

// uploading holds the media ids with an upload running in this process.
var uploading sync.Map

type uploadKey struct {
	s  *repo.Store
	id string
}

// spoolUpload copies body into a temporary file, failing with
// ErrMediaTooLarge past max bytes, and returns the file rewound to its start.
// The caller closes and removes it.
func spoolUpload(body io.Reader, max int64) (*os.File, int64, error) {
	f, err := os.CreateTemp("", "outreach-upload-*")
	if err != nil {
		return nil, 0, fmt.Errorf("media upload spool: %w", err)
	}
	fail := func(err error) (*os.File, int64, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, 0, err
	}
	n, err := io.Copy(f, &capped{r: body, left: max})
	switch {
	case errors.Is(err, ErrMediaTooLarge):
		return fail(err)
	case err != nil:
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fail(fmt.Errorf("media upload spool: %w", err))
		}
		return fail(repo.Invalid("body", "the upload was cut short after %d bytes; PUT the whole file again", n))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(fmt.Errorf("media upload spool: %w", err))
	}
	return f, n, nil
}

func uploadable(m *Media) error {
	if m.Archived() {
		return repo.Errorf(repo.CodeFailedPrecondition, "media %s is archived; restore_media it first", m.ID)
	}
	if m.State != MediaPendingUpload {
		return ErrMediaURLUsed
	}
	return nil
}

// AttachInput is what attach_media records about uploaded bytes.
type AttachInput struct {
	CoverageID, MediaID, Type string
	Filename, MimeType        *string
	SizeBytes                 *int64
	DurationSeconds           *float64
	Metadata                  map[string]any
}

// AttachMedia records the metadata of uploaded media. Attaching attached
// media again updates its metadata (so a retried call is harmless).
func (s *Store) AttachMedia(ctx context.Context, in AttachInput) (*Media, error) {
	if in.Filename != nil {
		if err := checkFilename(*in.Filename); err != nil {
			return nil, err
		}
	}
	if in.MimeType != nil {
		if err := checkMimeType(*in.MimeType); err != nil {
			return nil, err
		}
	}
	if in.DurationSeconds != nil && *in.DurationSeconds < 0 {
		return nil, repo.Invalid("duration_seconds", "must be 0 or more")
	}
	if err := repo.CheckFreeForm("metadata", in.Metadata); err != nil {
		return nil, err
	}
	if err := s.MustExist(ctx, repo.CollCoverage, "coverage_id", in.CoverageID); err != nil {
		return nil, err
	}
	check := func(m *Media) error {
		switch {
		case m.CoverageID != in.CoverageID:
			return repo.Invalid("media_id", "media %s belongs to coverage %s, not %s", m.ID, m.CoverageID, in.CoverageID)
		case m.Archived():
			return &repo.Error{Code: repo.CodeNotFound, Field: "media_id", Message: fmt.Sprintf("media_id: media %s is archived; restore it first", m.ID)}
		case m.State == MediaPendingUpload:
			return repo.Errorf(repo.CodeFailedPrecondition, "media %s has no bytes yet: PUT the file to the upload_url from upload_media_url first", m.ID)
		case in.SizeBytes != nil && m.SizeBytes != nil && *in.SizeBytes != *m.SizeBytes:
			return &repo.Error{Code: repo.CodeInvalid, Field: "size_bytes", Message: fmt.Sprintf("size_bytes: %d does not match the %d bytes stored for media %s; check the file, or leave size_bytes out", *in.SizeBytes, *m.SizeBytes, m.ID)}
		}
		return nil
	}
	m, err := repo.Find[*Media](ctx, s.Store, repo.CollMedia, in.MediaID)
	if err != nil {
		if repo.ErrorCode(err) == repo.CodeNotFound {
			return nil, repo.NotFoundField("media_id", "media", in.MediaID)
		}
		return nil, err
	}
	if err := check(m); err != nil {
		return nil, err
	}
	return repo.Modify(ctx, s.Store, repo.CollMedia, in.MediaID, audit.ActionUpdate, func(m *Media) error {
		if err := check(m); err != nil {
			return err
		}
		if m.State != MediaAttached {
			t := repo.Now()
			m.State, m.AttachedAt = MediaAttached, &t
		}
		m.Type = in.Type
		if in.Filename != nil {
			m.Filename = *in.Filename
		}
		if in.MimeType != nil {
			m.MimeType = *in.MimeType
		}
		if in.DurationSeconds != nil {
			m.DurationSeconds = in.DurationSeconds
		}
		if in.Metadata != nil {
			m.Metadata = in.Metadata
		}
		return nil
	})
}

// InlineInput is a small file sent whole to upload_media.
type InlineInput struct {
	CoverageID, Type, Filename, MimeType string
	Data                                 []byte
}

// CreateInlineMedia stores a small file and its attached media record at once.
func (s *Store) CreateInlineMedia(ctx context.Context, in InlineInput) (*Media, error) {
	if err := checkFilename(in.Filename); err != nil {
		return nil, err
	}
	if err := checkMimeType(in.MimeType); err != nil {
		return nil, err
	}
	if len(in.Data) == 0 {
		return nil, repo.Invalid("content_base64", "the file is empty")
	}
	if len(in.Data) > InlineMediaMaxBytes {
		return nil, repo.Invalid("content_base64", "the file is %d bytes; inline uploads are capped at %d bytes (512 KiB): use upload_media_url for larger files", len(in.Data), InlineMediaMaxBytes)
	}
	if err := s.MustExist(ctx, repo.CollCoverage, "coverage_id", in.CoverageID); err != nil {
		return nil, err
	}
	m := &Media{Meta: repo.Meta{ID: uuid.NewString()}, CoverageID: in.CoverageID, Type: in.Type, Filename: in.Filename, MimeType: in.MimeType}
	fileID, n, sum, err := s.storeBytes(ctx, m, bytes.NewReader(in.Data), InlineMediaMaxBytes)
	if err != nil {
		return nil, err
	}
	t := repo.Now()
	m.State, m.FileID, m.SizeBytes, m.SHA256, m.UploadedAt, m.AttachedAt = MediaAttached, fileID, &n, sum, &t, &t
	if err := repo.Insert(ctx, s.Store, repo.CollMedia, m); err != nil {
		return nil, err
	}
	return m, nil
}

// MediaCoverage is the coverage a media record belongs to, trimmed.
type MediaCoverage struct {
	ID          string     `bson:"_id" json:"id"`
	Title       string     `bson:"title" json:"title"`
	URL         string     `bson:"url,omitempty" json:"url,omitempty"`
	PublishedAt time.Time  `bson:"published_at" json:"published_at"`
	ArchivedAt  *time.Time `bson:"archived_at" json:"archived_at"`
}

// Media returns one media record and its coverage (nil if that is gone).
func (s *Store) Media(ctx context.Context, id string) (*Media, *MediaCoverage, error) {
	m, err := repo.Find[*Media](ctx, s.Store, repo.CollMedia, id)
	if err != nil {
		return nil, nil, err
	}
	var c MediaCoverage
	if err := s.Collection(repo.CollCoverage).FindOne(ctx, bson.M{"_id": m.CoverageID}).Decode(&c); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return m, nil, nil
		}
		return nil, nil, ledger.DriverErr(err, "coverage", m.CoverageID)
	}
	return m, &c, nil
}

// MediaFilter selects media; empty fields do not filter.
type MediaFilter struct {
	CoverageID, Type string
	IncludeArchived  bool
}

// ListMedia lists media newest first.
func (s *Store) ListMedia(ctx context.Context, f MediaFilter, limit, offset int) (repo.Page[Media], error) {
	filter := bson.M{}
	if f.CoverageID != "" {
		filter["coverage_id"] = f.CoverageID
	}
	if f.Type != "" {
		filter["type"] = f.Type
	}
	return repo.ListPage[Media](ctx, s.Store, repo.CollMedia, repo.Active(filter, f.IncludeArchived),
		bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}, limit, offset)
}

// ArchiveMedia archives a media record; its bytes stay.
func (s *Store) ArchiveMedia(ctx context.Context, id string) (*Media, error) {
	return repo.Archive[*Media](ctx, s.Store, repo.CollMedia, id, nil)
}

// RestoreMedia restores an archived media record.
func (s *Store) RestoreMedia(ctx context.Context, id string) (*Media, error) {
	return repo.Restore[*Media](ctx, s.Store, repo.CollMedia, id)
}

// ---------------------------------------------------------------------------
// Reading the bytes back.

// OpenMediaBytes returns a reader of the stored bytes of m, chunk by chunk:
// at most a few chunks are in memory at once, whatever the file's size.
func (s *Store) OpenMediaBytes(ctx context.Context, m *Media) (io.ReadCloser, error) {
	if m.FileID == "" {
		return nil, repo.Errorf(repo.CodeFailedPrecondition, "media %s has no bytes yet", m.ID)
	}
	var file struct {
		Length    int64 `bson:"length"`
		ChunkSize int32 `bson:"chunkSize"`
	}
	if err := s.Collection(repo.CollFiles).FindOne(ctx, bson.M{"_id": m.FileID}).Decode(&file); err != nil {
		return nil, ledger.DriverErr(err, "media file", m.FileID)
	}
	// MongoDB streams a sort on files_id+n from its index. FerretDB sorts in
	// memory (the whole file), so there the chunks are read in natural order,
	// which is the order they were written in, and checked below.
	opts := options.Find().SetBatchSize(4)
	if !strings.HasPrefix(s.Capabilities().Server, "FerretDB") {
		opts.SetSort(bson.D{{Key: "files_id", Value: 1}, {Key: "n", Value: 1}})
	}
	cur, err := s.Collection(repo.CollChunks).Find(ctx, bson.M{"files_id": m.FileID}, opts)
	if err != nil {
		return nil, ledger.DriverErr(err, "media file", m.FileID)
	}
	return &blobReader{ctx: ctx, cur: cur, left: file.Length, chunk: int(file.ChunkSize), id: m.FileID}, nil
}

type blobReader struct {
	ctx   context.Context
	cur   *mongo.Cursor
	buf   []byte
	n     int32
	left  int64
	chunk int
	id    string
}

func (b *blobReader) Read(p []byte) (int, error) {
	for len(b.buf) == 0 {
		if b.left == 0 {
			return 0, io.EOF
		}
		if !b.cur.Next(b.ctx) {
			if err := b.cur.Err(); err != nil {
				return 0, fmt.Errorf("media file %s: %w", b.id, err)
			}
			return 0, fmt.Errorf("media file %s: chunk %d missing", b.id, b.n)
		}
		var c struct {
			N    int32  `bson:"n"`
			Data []byte `bson:"data"`
		}
		if err := b.cur.Decode(&c); err != nil {
			return 0, fmt.Errorf("media file %s chunk %d: %w", b.id, b.n, err)
		}
		if c.N != b.n || len(c.Data) == 0 || int64(len(c.Data)) > b.left || (int64(len(c.Data)) < b.left && len(c.Data) != b.chunk) {
			return 0, fmt.Errorf("media file %s: chunk %d out of order or of the wrong size (got n=%d, %d bytes)", b.id, b.n, c.N, len(c.Data))
		}
		b.buf, b.n, b.left = c.Data, b.n+1, b.left-int64(len(c.Data))
	}
	k := copy(p, b.buf)
	b.buf = b.buf[k:]
	return k, nil
}

func (b *blobReader) Close() error { return b.cur.Close(context.WithoutCancel(b.ctx)) }

// ---------------------------------------------------------------------------
// Signed URLs.
//
// A URL carries the media id, the action (upload or download), its expiry
// and an HMAC-SHA256 of the three under the signing secret, which the
// store holds from start and never stores (mediakey.go).

// Actions of signed media URLs.
const (
	MediaUpload   = "upload"
	MediaDownload = "download"
)

func sign(key []byte, id, action string, exp int64) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "outreach-media-url\n%s\n%s\n%d", id, action, exp)
	return hex.EncodeToString(mac.Sum(nil))
}

// MediaURLExpiry is the expiry of a signed URL made now: now plus the
// configured lifetime, in whole seconds.
func (s *Store) MediaURLExpiry() time.Time {
	return time.Now().Add(s.MediaOptions().URLTTL).Truncate(time.Second).UTC()
}

// SignMediaURL returns a URL under base that allows action on media id until
// exp. It is a Secret (whoever holds it may act): its kept form is the URL
// without its signature.
func (s *Store) SignMediaURL(ctx context.Context, base, id, action string, exp time.Time) (repo.Secret, error) {
	key, err := s.SigningKey(ctx)
	if err != nil {
		return repo.Secret{}, err
	}
	unsigned := fmt.Sprintf("%s/media/%s/%s?expires=%d", strings.TrimRight(base, "/"), id, action, exp.Unix())
	return repo.NewSecret(unsigned+"&signature="+sign(key, id, action, exp.Unix()), unsigned), nil
}

// CheckMediaURL verifies a signed URL's parts: ErrMediaURLInvalid when the
// signature does not match (forged, altered, or for another action),
// ErrMediaURLExpired when it is past its expiry.
func (s *Store) CheckMediaURL(ctx context.Context, id, action, expires, signature string) error {
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || len(signature) != 2*sha256.Size {
		return ErrMediaURLInvalid
	}
	got, err := hex.DecodeString(signature)
	if err != nil {
		return ErrMediaURLInvalid
	}
	key, err := s.SigningKey(ctx)
	if err != nil {
		return err
	}
	want, _ := hex.DecodeString(sign(key, id, action, exp))
	if !hmac.Equal(got, want) {
		return ErrMediaURLInvalid
	}
	if time.Now().Unix() >= exp {
		return ErrMediaURLExpired
	}
	return nil
}

func mediaRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	return v.Linked(ctx, repo.CollCoverage, "coverage_id", repo.Str(state, "coverage_id"))
}

func init() { repo.RegisterRule(repo.CollMedia, mediaRule) }
