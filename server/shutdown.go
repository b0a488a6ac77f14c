package server

import (
	"context"
	"net/http"
)

// EndStreamsOnShutdown ends the event streams that clients hold open with a
// GET on /mcp when srv starts shutting down. Such a stream never ends by
// itself, so http.Server.Shutdown would wait for it until its deadline;
// ending it lets a graceful stop wait only for the calls in flight (which
// are POSTs, answered on their own responses). Clients reopen the stream
// when they reconnect.
func EndStreamsOnShutdown(srv *http.Server, next http.Handler) http.Handler {
	streams, end := context.WithCancel(context.Background())
	srv.RegisterOnShutdown(end)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer context.AfterFunc(streams, cancel)()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}
