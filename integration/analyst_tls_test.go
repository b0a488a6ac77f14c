package integration

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestAnalystTLS runs the analyst endpoint with a certificate from a CA
// made here: the Go driver and mongosh --tls --tlsCAFile connect and read;
// a client without TLS is refused; a burst of garbage handshakes leaves the
// server no goroutine and no file descriptor more (read from its metrics).
func TestAnalystTLS(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the analyst endpoint is the embedded store's")
	}
	dir := t.TempDir()
	ca := newTestCA(t)
	cert, key, caFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	ca.issue(t, "analyst endpoint", cert, key)
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	data := dataDir(t)
	addr := freeTCP(t)
	srv := startServer(t, data, "OUTREACH_MONGO_LISTEN="+addr, "OUTREACH_MONGO_TLS_CERT="+cert, "OUTREACH_MONGO_TLS_KEY="+key,
		"OUTREACH_METRICS_LISTEN=127.0.0.1:0")
	db := storeEnv(data)[0][len("OUTREACH_DB="):]
	uri := analystURI(addr, db, analystCLIKey(t, data)) + "&tls=true"
	ctx := context.Background()

	c := analystClient(t, uri, options.Client().SetTLSConfig(&tls.Config{RootCAs: ca.pool}))
	n, err := c.Database(db).Collection("campaigns").CountDocuments(ctx, bson.M{})
	if err != nil || n < 1 {
		t.Fatalf("driver over TLS: count campaigns = %d, %v", n, err)
	}

	if haveMongosh(t) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(cctx, mongoshPath, "--quiet", "--norc", "--tls", "--tlsCAFile", caFile, uri,
			"--eval", "db.campaigns.countDocuments({})").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != strconv.FormatInt(n, 10) {
			t.Errorf("mongosh --tls: %v\n%s", err, out)
		}
	}

	plain, err := mongo.Connect(options.Client().ApplyURI(strings.TrimSuffix(uri, "&tls=true")).SetServerSelectionTimeout(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Disconnect(ctx)
	if err := plain.Ping(ctx, nil); err == nil {
		t.Error("a client without TLS was answered on the TLS endpoint")
	}

	m := regexp.MustCompile(`"url":"(http://[^"]+)/metrics"[^\n]*"message":"serving metrics"`).FindStringSubmatch(srv.stderr.String())
	if m == nil {
		t.Fatalf("no metrics listener in the log:\n%s", srv.stderr)
	}
	gauge := func(name string) func() int {
		return func() int { return int(scrape(t, m[1], "")[name].GetMetric()[0].GetGauge().GetValue()) }
	}
	garbage := func() {
		for _, b := range [][]byte{[]byte("not TLS at all\r\n\r\n"), {0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3}, {0x16, 0x03, 0x03, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00}} {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conn.Write(b)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 512)
			for { // until the server closes the connection
				if _, err := conn.Read(buf); err != nil {
					break
				}
			}
			conn.Close()
		}
	}
	garbage() // warms up what stays
	goroutines, fds := gauge("go_goroutines")(), gauge("process_open_fds")()
	for range 10 {
		garbage()
	}
	settled(t, "server goroutines", goroutines, gauge("go_goroutines"))
	settled(t, "server file descriptors", fds, gauge("process_open_fds"))
}
