package backup

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// An S3 target (s3://bucket/prefix) is reached through the minio-go
// client, which speaks to AWS S3 and to any S3-compatible server. Its
// settings come from the environment only, so that no key enters a
// command line, a log line or a manifest:
//
//	OUTREACH_BACKUP_S3_ENDPOINT    the server (https://host:port; http:// for a plain one); AWS S3 by default
//	OUTREACH_BACKUP_S3_REGION      the bucket's region (else AWS_REGION)
//	OUTREACH_BACKUP_S3_ACCESS_KEY_ID and OUTREACH_BACKUP_S3_SECRET_ACCESS_KEY
//	                               the key (else AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN)

const s3Scheme = "s3://"

const defaultS3Endpoint = "https://s3.amazonaws.com"

// s3Target is one bucket of one server.
type s3Target struct {
	client *minio.Client
	bucket string
}

var (
	s3Mu      sync.Mutex
	s3Clients = map[string]*minio.Client{}
)

// s3For is the target of the bucket loc names, its client made from the
// environment once per endpoint and key.
func s3For(loc string) (target, error) {
	bucket, _, _ := strings.Cut(strings.TrimPrefix(loc, s3Scheme), "/")
	if bucket == "" {
		return nil, fmt.Errorf("%s: want s3://bucket/prefix", loc)
	}
	endpoint := firstEnv("OUTREACH_BACKUP_S3_ENDPOINT")
	if endpoint == "" {
		endpoint = defaultS3Endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("OUTREACH_BACKUP_S3_ENDPOINT %q: want https://host[:port] (or http://)", endpoint)
	}
	id := firstEnv("OUTREACH_BACKUP_S3_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID")
	secret := firstEnv("OUTREACH_BACKUP_S3_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY")
	token := ""
	if os.Getenv("OUTREACH_BACKUP_S3_ACCESS_KEY_ID") == "" {
		token = os.Getenv("AWS_SESSION_TOKEN")
	}
	if id == "" || secret == "" {
		return nil, fmt.Errorf("%s: no S3 key: set OUTREACH_BACKUP_S3_ACCESS_KEY_ID and OUTREACH_BACKUP_S3_SECRET_ACCESS_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", loc)
	}
	region := firstEnv("OUTREACH_BACKUP_S3_REGION", "AWS_REGION")
	// The key is part of the cache's key (hashed: never kept in the clear
	// beside the client).
	sum := sha256.Sum256([]byte(u.String() + "\x00" + region + "\x00" + id + "\x00" + secret + "\x00" + token))
	key := string(sum[:])
	s3Mu.Lock()
	defer s3Mu.Unlock()
	c := s3Clients[key]
	if c == nil {
		c, err = minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(id, secret, token), Secure: u.Scheme == "https", Region: region})
		if err != nil {
			return nil, fmt.Errorf("S3 endpoint %s: %w", u.Host, err)
		}
		s3Clients[key] = c
	}
	return &s3Target{client: c, bucket: bucket}, nil
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// key is loc's object key in the bucket.
func (t *s3Target) key(loc string) string {
	_, k, _ := strings.Cut(strings.TrimPrefix(loc, s3Scheme), "/")
	return k
}

// create writes the content to a local temporary file first: its size
// and SHA-256 are known before the upload, which is one PUT (or one
// multipart upload) that S3 makes visible whole or not at all.
func (t *s3Target) create(ctx context.Context, loc string, fill func(io.Writer) error) (int64, string, error) {
	f, err := os.CreateTemp("", "outreach-backup-*")
	if err != nil {
		return 0, "", err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	if err := fill(cw); err != nil {
		return 0, "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, "", err
	}
	_, err = t.client.PutObject(ctx, t.bucket, t.key(loc), f, cw.n, minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: 16 << 20})
	if err != nil {
		return 0, "", s3Error(err)
	}
	return cw.n, hexSum(h), nil
}

func (t *s3Target) open(ctx context.Context, loc string) (io.ReadCloser, error) {
	// A stat first: GetObject reports a missing object only at the first read.
	if _, err := t.client.StatObject(ctx, t.bucket, t.key(loc), minio.StatObjectOptions{}); err != nil {
		return nil, fmt.Errorf("%s: %w", loc, s3Error(err))
	}
	o, err := t.client.GetObject(ctx, t.bucket, t.key(loc), minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc, s3Error(err))
	}
	return o, nil
}

func (t *s3Target) list(ctx context.Context, loc string, all bool) ([]string, error) {
	prefix := strings.TrimSuffix(t.key(loc), "/")
	if prefix != "" {
		prefix += "/"
	}
	var out []string
	for o := range t.client.ListObjects(ctx, t.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: all}) {
		if o.Err != nil {
			return nil, fmt.Errorf("%s: %w", loc, s3Error(o.Err))
		}
		if name := strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), "/"); name != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (t *s3Target) remove(ctx context.Context, loc string) error {
	return s3Error(t.client.RemoveObject(ctx, t.bucket, t.key(loc), minio.RemoveObjectOptions{}))
}

func (t *s3Target) removeAll(ctx context.Context, loc string) error {
	names, err := t.list(ctx, loc, true)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := t.remove(ctx, join(loc, n)); err != nil {
			return err
		}
	}
	return nil
}

// s3Error maps a missing object or bucket to fs.ErrNotExist, keeping the
// server's words.
func s3Error(err error) error {
	if err == nil {
		return nil
	}
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NoSuchBucket", "NotFound":
		return fmt.Errorf("%w (%s)", fs.ErrNotExist, err.Error())
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && resp.StatusCode == 404 {
		return fmt.Errorf("%w (%s)", fs.ErrNotExist, err.Error())
	}
	return err
}
