package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves the MCP protocol for tenant over in and out (a local
// client that started the process) until the client closes the stream or
// ctx ends; out is left open.
func (s *Service) ServeStdio(ctx context.Context, tenant string, in io.Reader, out io.Writer) error {
	err := s.Server(tenant).Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return fmt.Errorf("mcp: %w", err)
}

// nopWriteCloser is an io.Writer whose Close does nothing.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
