package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/pipeline"
)

// newCoverage records a piece of coverage through create_coverage for media
// to attach to.
func newCoverage(t *testing.T, c *testenv.Client, title string) string {
	t.Helper()
	return mk(t, c, "create_coverage", M{"title": title, "url": "https://example.com/" + strings.ReplaceAll(title, " ", "-"),
		"published_at": time.Now().UTC().Format(time.RFC3339), "type": "article"})
}

// fileBytes is a deterministic pseudo-random file of n bytes, generated as it
// is read: the test never holds the file either.
type fileBytes struct {
	r    *rand.ChaCha8
	left int64
}

func newFile(seed byte, n int64) *fileBytes {
	return &fileBytes{r: rand.NewChaCha8([32]byte{seed}), left: n}
}

func (f *fileBytes) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > f.left {
		p = p[:f.left]
	}
	f.r.Read(p)
	f.left -= int64(len(p))
	return len(p), nil
}

type uploadURL struct {
	MediaID      string `json:"media_id"`
	UploadURL    string `json:"upload_url"`
	ExpiresAt    string `json:"expires_at"`
	Instructions string `json:"instructions"`
}

type media struct {
	ID                string         `json:"id"`
	CoverageID        string         `json:"coverage_id"`
	State             string         `json:"state"`
	Type              string         `json:"type"`
	Filename          string         `json:"filename"`
	MimeType          string         `json:"mime_type"`
	SizeBytes         int64          `json:"size_bytes"`
	SHA256            string         `json:"sha256"`
	DurationSeconds   float64        `json:"duration_seconds"`
	Metadata          map[string]any `json:"metadata"`
	ArchivedAt        *string        `json:"archived_at"`
	DownloadURL       string         `json:"download_url"`
	DownloadExpiresAt string         `json:"download_expires_at"`
	Coverage          *struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	} `json:"coverage"`
}

// send makes one request; length -1 sends the body chunked (size unknown).
func send(t *testing.T, method, u string, body io.Reader, length int64) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	if length == 0 {
		req.Body = http.NoBody
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// heapGrowth runs f and returns how far the heap in use rose above its level
// before f, sampled every few milliseconds. The garbage collector runs more
// often meanwhile, so the figure follows live memory rather than garbage
// waiting for collection; a file held whole would show in full either way.
func heapGrowth(f func()) (peak uint64, allocated uint64) {
	old := debug.SetGCPercent(10)
	defer debug.SetGCPercent(old)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var max atomic.Uint64
	max.Store(before.HeapInuse)
	stop, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); <-done }
	defer halt() // the sampler ends even when f fails the test
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > max.Load() {
				max.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	halt()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return max.Load() - before.HeapInuse, after.TotalAlloc - before.TotalAlloc
}

func TestMediaLargeFileThroughSignedURLs(t *testing.T) {
	const size = 50 << 20
	// A transfer that held the file would grow the heap by at least its
	// size. A streamed one holds a few chunks at a time, but the figure is
	// the whole process's (the in-process store's buffers and the package's
	// background work included) and was seen between 10 and 30 MiB under
	// load: three quarters of the file still tells the two apart.
	const bound = size * 3 / 4
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "media-big")
	cov := newCoverage(t, c, "launch feature")

	var up uploadURL
	c.Must("upload_media_url", M{"coverage_id": cov, "filename": "interview.mp4", "mime_type": "video/mp4"}, &up)
	base := strings.TrimSuffix(env.URL, "/mcp")
	if !strings.HasPrefix(up.UploadURL, base+"/media/"+up.MediaID+"/upload?") {
		t.Fatalf("upload_url %q is not under the service's base %s", up.UploadURL, base)
	}
	exp, err := time.Parse(time.RFC3339, up.ExpiresAt)
	if err != nil || exp.Before(time.Now().Add(14*time.Minute)) || exp.After(time.Now().Add(16*time.Minute)) {
		t.Errorf("expires_at %q: want about 15 minutes from now", up.ExpiresAt)
	}
	if !strings.Contains(up.Instructions, "PUT") || !strings.Contains(up.Instructions, "attach_media") {
		t.Errorf("instructions do not say how: %q", up.Instructions)
	}

	var resp *http.Response
	var body []byte
	growth, alloc := heapGrowth(func() {
		resp, body = send(t, http.MethodPut, up.UploadURL, newFile(7, size), size)
	})
	t.Logf("upload of %d MiB: heap in use grew by %.1f MiB at most (%.0f MiB allocated in all, collected as it went)",
		size>>20, float64(growth)/(1<<20), float64(alloc)/(1<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	if growth > bound {
		t.Errorf("upload grew the heap by %d MiB; want under %d MiB for a %d MiB file", growth>>20, bound>>20, size>>20)
	}
	want := sha256.New()
	io.Copy(want, newFile(7, size))
	wantSum := hex.EncodeToString(want.Sum(nil))
	var put struct {
		MediaID   string `json:"media_id"`
		State     string `json:"state"`
		SizeBytes int64  `json:"size_bytes"`
		SHA256    string `json:"sha256"`
	}
	if err := json.Unmarshal(body, &put); err != nil {
		t.Fatalf("PUT answer %s: %v", body, err)
	}
	if diff := cmp.Diff(struct {
		MediaID   string `json:"media_id"`
		State     string `json:"state"`
		SizeBytes int64  `json:"size_bytes"`
		SHA256    string `json:"sha256"`
	}{up.MediaID, pipeline.MediaUploaded, size, wantSum}, put); diff != "" {
		t.Errorf("PUT answer (-want +got):\n%s", diff)
	}

	var m media
	c.Must("attach_media", M{"coverage_id": cov, "media_id": up.MediaID, "type": "video", "size_bytes": size,
		"duration_seconds": 93.5, "metadata": M{"resolution": "1080p"}}, &m)
	if m.State != pipeline.MediaAttached || m.Type != "video" || m.SizeBytes != size || m.SHA256 != wantSum {
		t.Errorf("attached: %+v", m)
	}

	c.Must("get_media", M{"id": up.MediaID}, &m)
	if !strings.HasPrefix(m.DownloadURL, base+"/media/"+up.MediaID+"/download?") || m.Coverage == nil || m.Coverage.ID != cov {
		t.Fatalf("get_media: %+v", m)
	}
	var mismatch string
	growth, _ = heapGrowth(func() {
		resp, err := http.Get(m.DownloadURL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "video/mp4" || resp.ContentLength != size {
			t.Fatalf("GET: %d, Content-Type %q, Content-Length %d", resp.StatusCode, resp.Header.Get("Content-Type"), resp.ContentLength)
		}
		mismatch = sameBytes(newFile(7, size), resp.Body)
	})
	t.Logf("download of %d MiB: heap in use grew by %.1f MiB at most", size>>20, float64(growth)/(1<<20))
	if mismatch != "" {
		t.Fatalf("downloaded bytes differ from the uploaded file: %s", mismatch)
	}
	if growth > bound {
		t.Errorf("download grew the heap by %d MiB; want under %d MiB", growth>>20, bound>>20)
	}
}

// sameBytes compares two streams block by block; "" means identical.
func sameBytes(want, got io.Reader) string {
	a, b := make([]byte, 64<<10), make([]byte, 64<<10)
	var off int64
	for {
		n, errA := io.ReadFull(want, a)
		k, errB := io.ReadFull(got, b)
		if n != k || !bytes.Equal(a[:n], b[:k]) {
			return fmt.Sprintf("at offset about %d: want %d bytes, got %d (%v)", off, n, k, errB)
		}
		off += int64(n)
		if errA != nil || errB != nil {
			if (errA == nil) != (errB == nil) {
				return fmt.Sprintf("length differs at %d (%v / %v)", off, errA, errB)
			}
			return ""
		}
	}
}

func TestMediaSignedURLRefusals(t *testing.T) {
	const capBytes = 1000
	env := testenv.NewWith(t, testenv.Options{Media: pipeline.MediaOptions{MaxBytes: capBytes, URLTTL: 3 * time.Second}})
	c := env.Admin()
	cov := newCoverage(t, c, "review")
	newURL := func() uploadURL {
		var up uploadURL
		c.Must("upload_media_url", M{"coverage_id": cov, "filename": "a.pdf", "mime_type": "application/pdf"}, &up)
		return up
	}
	up := newURL()
	other := newURL()
	u, _ := url.Parse(up.UploadURL)
	q := u.Query()
	alter := func(f func(u *url.URL, q url.Values)) string {
		u2 := *u
		q2 := url.Values{}
		for k, v := range q {
			q2[k] = append([]string(nil), v...)
		}
		f(&u2, q2)
		u2.RawQuery = q2.Encode()
		return u2.String()
	}
	flip := func(s string) string {
		if s[len(s)-1] == '0' {
			return s[:len(s)-1] + "1"
		}
		return s[:len(s)-1] + "0"
	}
	data := strings.Repeat("x", capBytes)
	refusals := []struct {
		name   string
		url    string
		body   string
		length int64
		status int
	}{
		{"forged signature", alter(func(_ *url.URL, q url.Values) { q.Set("signature", flip(q.Get("signature"))) }), data, capBytes, http.StatusForbidden},
		{"no signature", alter(func(_ *url.URL, q url.Values) { q.Del("signature") }), data, capBytes, http.StatusForbidden},
		{"extended expiry", alter(func(_ *url.URL, q url.Values) { q.Set("expires", fmt.Sprint(time.Now().Add(time.Hour).Unix())) }), data, capBytes, http.StatusForbidden},
		{"signature of another media", alter(func(u *url.URL, _ url.Values) { u.Path = "/media/" + other.MediaID + "/upload" }), data, capBytes, http.StatusForbidden},
		{"over the cap, announced", up.UploadURL, data + "y", capBytes + 1, http.StatusRequestEntityTooLarge},
		{"over the cap, streamed", up.UploadURL, data + "y", -1, http.StatusRequestEntityTooLarge},
		{"empty", up.UploadURL, "", 0, http.StatusBadRequest},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			resp, body := send(t, http.MethodPut, r.url, strings.NewReader(r.body), r.length)
			if resp.StatusCode != r.status {
				t.Fatalf("status %d (%s); want %d", resp.StatusCode, body, r.status)
			}
			var e struct{ Error testenv.Error }
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Errorf("body %s is not the error model", body)
			}
		})
	}
	var m media
	c.Must("get_media", M{"id": up.MediaID}, &m)
	if m.State != pipeline.MediaPendingUpload || m.DownloadURL != "" {
		t.Fatalf("after refused uploads: state %q download_url %q; want pending_upload and no URL", m.State, m.DownloadURL)
	}

	// A download URL cannot be used to upload, nor an upload URL to download.
	if resp, body := send(t, http.MethodGet, strings.Replace(up.UploadURL, "/upload?", "/download?", 1), nil, 0); resp.StatusCode != http.StatusForbidden {
		t.Errorf("upload URL used to download: %d %s", resp.StatusCode, body)
	}

	// A file of exactly the cap is stored; the URL then refuses a second use.
	if resp, body := send(t, http.MethodPut, up.UploadURL, strings.NewReader(data), capBytes); resp.StatusCode != http.StatusOK {
		t.Fatalf("upload at the cap: %d %s", resp.StatusCode, body)
	}
	resp, body := send(t, http.MethodPut, up.UploadURL, strings.NewReader("again"), 5)
	if resp.StatusCode != http.StatusGone || !strings.Contains(string(body), "already been used") {
		t.Errorf("reused URL: %d %s; want 410", resp.StatusCode, body)
	}
	c.Must("get_media", M{"id": up.MediaID}, &m)
	if m.SizeBytes != capBytes {
		t.Errorf("size after reuse attempt = %d, want %d", m.SizeBytes, capBytes)
	}
	download := m.DownloadURL

	// Two uploads racing on one URL: exactly one is stored, the one told 200.
	// (The loser is refused: 410 once the write path is serialized on the
	// embedded store; before that its write may fail on the change counter.)
	race := newURL()
	type result struct {
		body   string
		status int
	}
	results := make(chan result, 2)
	for i := range 2 {
		go func() {
			r := result{body: strings.Repeat(fmt.Sprint(i), 500)}
			req, _ := http.NewRequest(http.MethodPut, race.UploadURL, strings.NewReader(r.body))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				r.status = resp.StatusCode
			}
			results <- r
		}()
	}
	var won []string
	for range 2 {
		r := <-results
		switch {
		case r.status == http.StatusOK:
			won = append(won, r.body)
		case r.status < 400 || r.status >= 500 && r.status != 0:
			t.Errorf("racing upload: status %d; want 200 or a refusal", r.status)
		}
	}
	if len(won) != 1 {
		t.Fatalf("racing uploads: %d succeeded; want exactly 1", len(won))
	}
	var raced media
	c.Must("get_media", M{"id": race.MediaID}, &raced)
	if sum := sha256.Sum256([]byte(won[0])); raced.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("racing uploads: stored %s, not the upload that was told 200", raced.SHA256)
	}

	// Archived media takes no upload.
	c.Must("archive_media", M{"id": other.MediaID}, nil)
	if resp, body := send(t, http.MethodPut, other.UploadURL, strings.NewReader("x"), 1); resp.StatusCode != http.StatusConflict {
		t.Errorf("upload to archived media: %d %s; want 409", resp.StatusCode, body)
	}

	// Expired URLs, for upload and download.
	late := newURL()
	exp, _ := time.Parse(time.RFC3339, late.ExpiresAt)
	time.Sleep(time.Until(exp) + 100*time.Millisecond)
	if resp, body := send(t, http.MethodPut, late.UploadURL, strings.NewReader("x"), 1); resp.StatusCode != http.StatusGone || !strings.Contains(string(body), "expired") {
		t.Errorf("expired upload URL: %d %s; want 410", resp.StatusCode, body)
	}
	if resp, body := send(t, http.MethodGet, download, nil, 0); resp.StatusCode != http.StatusGone {
		t.Errorf("expired download URL: %d %s; want 410", resp.StatusCode, body)
	}
}

func TestMediaAttachRules(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	cov := newCoverage(t, c, "podcast")
	cov2 := newCoverage(t, c, "other")
	var up uploadURL
	c.Must("upload_media_url", M{"coverage_id": cov, "filename": "ep.mp3", "mime_type": "audio/mpeg"}, &up)
	attach := func(extra M) M {
		a := M{"coverage_id": cov, "media_id": up.MediaID, "type": "audio"}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	c.Fail("attach_media", attach(nil), repo.CodeFailedPrecondition) // no bytes yet
	if resp, body := send(t, http.MethodPut, up.UploadURL, strings.NewReader("ID3 audio"), 9); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	cases := []struct {
		name, code, field string
		args              M
	}{
		{"other coverage", repo.CodeInvalid, "media_id", attach(M{"coverage_id": cov2})},
		{"size mismatch", repo.CodeInvalid, "size_bytes", attach(M{"size_bytes": 10})},
		{"bad type", repo.CodeInvalid, "type", attach(M{"type": "podcast"})},
		{"metadata key", repo.CodeInvalid, "metadata", attach(M{"metadata": M{"$set": 1}})},
		{"unknown media", repo.CodeNotFound, "media_id", attach(M{"media_id": "0b5f2a52-5c3e-4d7e-8f3a-2b1c0d9e8f7a"})},
		{"unknown coverage", repo.CodeNotFound, "coverage_id", attach(M{"coverage_id": "0b5f2a52-5c3e-4d7e-8f3a-2b1c0d9e8f7a"})},
		{"not a uuid", repo.CodeInvalid, "media_id", attach(M{"media_id": "abc"})},
		{"unknown argument", repo.CodeInvalid, "size", attach(M{"size": 9})},
		{"bad mime type", repo.CodeInvalid, "mime_type", attach(M{"mime_type": "mp3"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := c.Fail("attach_media", tc.args, tc.code)
			if e.Field != tc.field {
				t.Errorf("field %q (%s); want %q", e.Field, e.Message, tc.field)
			}
		})
	}
	e := c.Fail("attach_media", attach(M{"type": "podcast"}), repo.CodeInvalid)
	if !strings.Contains(e.Message, "audio_clip") {
		t.Errorf("enum error does not list the allowed values: %s", e.Message)
	}
	var m media
	c.Must("attach_media", attach(M{"size_bytes": 9, "metadata": M{"episode": 12}}), &m)
	c.Must("attach_media", attach(M{"type": "audio_clip", "filename": "ep12.mp3", "metadata": M{"episode": 12, "host": "Kim"}}), &m)
	if m.State != pipeline.MediaAttached || m.Type != "audio_clip" || m.Filename != "ep12.mp3" || m.Metadata["host"] != "Kim" {
		t.Errorf("after second attach: %+v", m)
	}
}

func TestMediaInlineUpload(t *testing.T) {
	env := testenv.NewWith(t, testenv.Options{Media: pipeline.MediaOptions{PublicURL: "https://outreach.example.com/"}})
	c := env.Admin()
	cov := newCoverage(t, c, "photo")
	png := []byte("\x89PNG\r\n\x1a\n fake image bytes")
	var m media
	c.Must("upload_media", M{"coverage_id": cov, "type": "image", "filename": "logo.png", "mime_type": "image/png",
		"content_base64": base64.StdEncoding.EncodeToString(png)}, &m)
	sum := sha256.Sum256(png)
	if m.State != pipeline.MediaAttached || m.SizeBytes != int64(len(png)) || m.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("upload_media: %+v", m)
	}
	c.Must("get_media", M{"id": m.ID}, &m)
	const public = "https://outreach.example.com/media/"
	if !strings.HasPrefix(m.DownloadURL, public+m.ID+"/download?") {
		t.Fatalf("download_url %q is not under the configured public URL", m.DownloadURL)
	}
	// The configured public URL is for clients; fetch the same path here.
	resp, body := send(t, http.MethodGet, strings.TrimSuffix(env.URL, "/mcp")+"/media/"+strings.TrimPrefix(m.DownloadURL, public), nil, 0)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, png) || resp.Header.Get("Content-Type") != "image/png" ||
		resp.Header.Get("Content-Length") != fmt.Sprint(len(png)) || !strings.Contains(resp.Header.Get("Content-Disposition"), "logo.png") {
		t.Errorf("download: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	big := base64.StdEncoding.EncodeToString(make([]byte, pipeline.InlineMediaMaxBytes+1))
	e := c.Fail("upload_media", M{"coverage_id": cov, "type": "image", "filename": "big.png", "mime_type": "image/png", "content_base64": big}, repo.CodeInvalid)
	if !strings.Contains(e.Message, "512 KiB") || !strings.Contains(e.Message, "upload_media_url") {
		t.Errorf("over the inline cap: %s", e.Message)
	}
	c.Must("upload_media", M{"coverage_id": cov, "type": "document", "filename": "max.bin", "mime_type": "application/octet-stream",
		"content_base64": base64.StdEncoding.EncodeToString(make([]byte, pipeline.InlineMediaMaxBytes))}, &m)
	if m.SizeBytes != pipeline.InlineMediaMaxBytes {
		t.Errorf("at the inline cap: size %d", m.SizeBytes)
	}
	c.Fail("upload_media", M{"coverage_id": cov, "type": "image", "filename": "x.png", "mime_type": "image/png", "content_base64": "not base64!"}, repo.CodeInvalid)
	c.Fail("upload_media", M{"coverage_id": cov, "type": "image", "filename": "../x.png", "mime_type": "image/png", "content_base64": "eA=="}, repo.CodeInvalid)
	c.Fail("upload_media", M{"coverage_id": "0b5f2a52-5c3e-4d7e-8f3a-2b1c0d9e8f7a", "type": "image", "filename": "x.png", "mime_type": "image/png", "content_base64": "eA=="}, repo.CodeNotFound)
}

func TestMediaChangeLogListArchiveRestore(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "media-session")
	cov := newCoverage(t, c, "segment")
	var up uploadURL
	c.Must("upload_media_url", M{"coverage_id": cov, "filename": "clip.mov", "mime_type": "video/quicktime"}, &up)
	if resp, body := send(t, http.MethodPut, up.UploadURL, strings.NewReader("moov"), 4); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	c.Must("attach_media", M{"coverage_id": cov, "media_id": up.MediaID, "type": "video_clip"}, nil)
	var doc media
	c.Must("upload_media", M{"coverage_id": cov, "type": "document", "filename": "brief.txt", "mime_type": "text/plain", "content_base64": "aGk="}, &doc)

	type change struct {
		Action    string         `json:"action"`
		Tool      string         `json:"tool"`
		SessionID string         `json:"session_id"`
		After     map[string]any `json:"after"`
	}
	var log struct{ Changes []change }
	c.Must("get_change_log", M{"record_id": up.MediaID}, &log)
	var got []string
	for _, ch := range log.Changes {
		got = append(got, fmt.Sprintf("%s %s %s %v", ch.Action, ch.Tool, ch.SessionID, ch.After["state"]))
	}
	want := []string{
		"update attach_media media-session attached",
		"update upload_media_url (PUT) media-session uploaded",
		"create upload_media_url media-session pending_upload",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("change log of the uploaded media (-want +got):\n%s", diff)
	}
	if after := log.Changes[1].After; after["sha256"] == nil || after["size_bytes"] != float64(4) {
		t.Errorf("upload entry after = %v", after)
	}

	// The URL-signing secret is not in the store at all (TestNoSecretAtRest
	// looks for it everywhere): signing URLs writes no settings record.
	var settings struct {
		Total   int
		Changes []change
	}
	c.Must("get_change_log", M{"collection": "settings"}, &settings)
	if settings.Total != 0 {
		t.Errorf("settings changes: %+v; want none", settings)
	}

	var list struct {
		Total int
		Media []media
	}
	c.Must("list_media", M{"coverage_id": cov}, &list)
	if diff := cmp.Diff([]string{doc.ID, up.MediaID}, ids(list.Media)); diff != "" || list.Total != 2 {
		t.Errorf("list_media (-want +got):\n%s", diff)
	}
	c.Must("list_media", M{"type": "video_clip", "limit": 1}, &list)
	if diff := cmp.Diff([]string{up.MediaID}, ids(list.Media)); diff != "" {
		t.Errorf("list_media by type (-want +got):\n%s", diff)
	}
	c.Must("list_media", M{"coverage_id": cov, "limit": 1, "offset": 1}, &list)
	if diff := cmp.Diff([]string{up.MediaID}, ids(list.Media)); diff != "" || list.Total != 2 {
		t.Errorf("list_media page 2 (-want +got):\n%s", diff)
	}
	c.Fail("list_media", M{"type": "gif"}, repo.CodeInvalid)
	c.Fail("list_media", M{"limit": 201}, repo.CodeInvalid)

	var m media
	c.Must("get_media", M{"id": up.MediaID}, &m)
	download := m.DownloadURL
	c.Must("archive_media", M{"id": up.MediaID}, nil)
	c.Fail("archive_media", M{"id": up.MediaID}, repo.CodeFailedPrecondition)
	c.Must("list_media", M{"coverage_id": cov}, &list)
	if diff := cmp.Diff([]string{doc.ID}, ids(list.Media)); diff != "" {
		t.Errorf("list after archive (-want +got):\n%s", diff)
	}
	c.Must("list_media", M{"coverage_id": cov, "include_archived": true}, &list)
	if list.Total != 2 {
		t.Errorf("include_archived total = %d, want 2", list.Total)
	}
	var archived media
	c.Must("get_media", M{"id": up.MediaID}, &archived)
	if archived.ArchivedAt == nil || archived.DownloadURL != "" {
		t.Errorf("archived get_media: %+v", archived)
	}
	if resp, body := send(t, http.MethodGet, download, nil, 0); resp.StatusCode != http.StatusConflict {
		t.Errorf("download of archived media: %d %s; want 409", resp.StatusCode, body)
	}
	c.Must("restore_media", M{"id": up.MediaID}, nil)
	c.Fail("restore_media", M{"id": up.MediaID}, repo.CodeFailedPrecondition)
	if resp, body := send(t, http.MethodGet, download, nil, 0); resp.StatusCode != http.StatusOK || string(body) != "moov" {
		t.Errorf("download after restore: %d %q; want the bytes back", resp.StatusCode, body)
	}
	c.Must("get_change_log", M{"record_id": up.MediaID, "limit": 2}, &log)
	got = nil
	for _, ch := range log.Changes {
		got = append(got, ch.Action+" "+ch.Tool)
	}
	if diff := cmp.Diff([]string{"restore restore_media", "archive archive_media"}, got); diff != "" {
		t.Errorf("archive/restore entries (-want +got):\n%s", diff)
	}
	c.Fail("get_media", M{"id": "0b5f2a52-5c3e-4d7e-8f3a-2b1c0d9e8f7a"}, repo.CodeNotFound)
}

func ids(ms []media) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}
