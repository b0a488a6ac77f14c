// Command s3server is an S3-compatible server for the backup tests: gofakes3
// (github.com/johannesboyne/gofakes3) over memory, on a real HTTP listener,
// so that the backup package's S3 client speaks the S3 protocol to it. It
// is a module of its own so that the server's dependencies stay out of the
// service's build. It prints its address, then serves until killed or
// until its standard input closes (the test that started it ended).
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	bucket := flag.String("bucket", "backups", "the bucket to create")
	flag.Parse()
	mem := s3mem.New()
	if err := mem.CreateBucket(*bucket); err != nil {
		log.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s\n", l.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	log.Fatal(http.Serve(l, gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()))
}
