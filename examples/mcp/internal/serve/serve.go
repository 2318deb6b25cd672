// Package serve holds what the example MCP servers share: serving one
// mcp.Server over stdio or streamable HTTP, reading Tollgate's idempotency
// key from a call's _meta, and default file locations.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// IdempotencyKeyMeta is the _meta key under which Tollgate passes a
// side-effecting call's idempotency key.
const IdempotencyKeyMeta = "tollgate/idempotency_key"

// Path is where the streamable HTTP endpoint is mounted.
const Path = "/mcp"

// IdempotencyKey returns the call's "tollgate/idempotency_key" _meta value,
// or "" when the caller sent none (or sent a non-string).
func IdempotencyKey(req *mcp.CallToolRequest) string {
	if req == nil || req.Params == nil {
		return ""
	}
	k, _ := req.Params.GetMeta()[IdempotencyKeyMeta].(string)
	return k
}

// HomeFile is $TOLLGATE_HOME/name when TOLLGATE_HOME is set, else ./name.
func HomeFile(name string) string {
	if home := os.Getenv("TOLLGATE_HOME"); home != "" {
		return filepath.Join(home, name)
	}
	return name
}

// Run serves srv until ctx ends or, on stdio, until the client closes its
// end. With httpAddr empty it speaks newline-delimited JSON-RPC on
// stdin/stdout (mcp.StdioTransport when they are the process's own);
// otherwise it listens on httpAddr (port 0 picks a free port) and serves
// streamable HTTP at http://ADDR/mcp, announcing the URL on stderr as
// "mcp: serving http://ADDR/mcp".
//
// A client hanging up and ctx being cancelled are normal ends: Run returns
// nil for both.
func Run(ctx context.Context, srv *mcp.Server, httpAddr string, stdin io.Reader, stdout, stderr io.Writer) error {
	if httpAddr != "" {
		return runHTTP(ctx, srv, httpAddr, stderr)
	}
	var t mcp.Transport
	if stdin == os.Stdin && stdout == os.Stdout {
		t = &mcp.StdioTransport{}
	} else {
		t = &mcp.IOTransport{Reader: readCloser(stdin), Writer: writeCloser(stdout)}
	}
	err := srv.Run(ctx, t)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, mcp.ErrConnectionClosed) || ctx.Err() != nil {
		return nil
	}
	return err
}

func runHTTP(ctx context.Context, srv *mcp.Server, addr string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(Path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "mcp: serving http://%s%s\n", ln.Addr(), Path)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// readCloser keeps a reader's Close (an *os.File, an *io.PipeReader) so that
// closing the session unblocks a pending read.
func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func writeCloser(w io.Writer) io.WriteCloser {
	if wc, ok := w.(io.WriteCloser); ok {
		return wc
	}
	return nopWriteCloser{w}
}

// Ptr returns &v, for the pointer-valued annotation hints.
func Ptr[T any](v T) *T { return &v }
