package proxy

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Replies an upstream compressed unasked. Where the gateway reads the
// reply (to capture it, bind the states it names, or scrub the operator's
// account out of it), it drops the client's Accept-Encoding, and its
// transport asks for none; an upstream, or a CDN in front of it, may
// still compress. A reply in gzip (x-gzip) or deflate (zlib, or a bare
// DEFLATE stream as some servers send) is then decoded before anything
// reads it, and relayed decoded, its Content-Encoding and Content-Length
// removed: the client's own Accept-Encoding never reached the upstream,
// and identity is the one coding every client reads (an event stream
// must be decoded anyway to hold its terminal event back, see teeBody,
// and to scrub its error events, see scrubStream).
//
// A whole reply is decoded only when it decodes cleanly within the bound
// the gateway reads a plain one to, maxCaptureBytes (maxModelsBody for a
// model list): a larger one (a decompression bomb costs at most that much
// inflating) or a corrupt one is relayed as the upstream sent it, as
// before, and not captured (capture_skipped too_large, unreadable). An
// event stream is decoded as it is relayed, holding no more than a
// decoder's window: its capture is bounded by maxCaptureBytes of decoded
// bytes as a plain stream's is by its plain ones, and a stream that stops
// decoding is aborted like one the upstream broke off (capture_skipped
// unreadable). A reply in another coding (br, zstd, codings stacked) is
// relayed as sent and not captured, as before; so is a file's content
// (forward.download), which nothing reads.

// errBadEncoding is the error of a compressed reply that does not decode.
var errBadEncoding = errors.New("the reply does not decode as its Content-Encoding says")

// decodable reports whether a Content-Encoding value names one coding the
// gateway decodes.
func decodable(enc string) bool {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "gzip", "x-gzip", "deflate":
		return true
	}
	return false
}

// encoded reports whether a Content-Encoding value names a coding at all.
func encoded(enc string) bool {
	enc = strings.TrimSpace(enc)
	return enc != "" && !strings.EqualFold(enc, "identity")
}

// decoder reads what enc (decodable) encodes in r, and reports an error
// for bytes after its end.
type decoder struct {
	src *bufio.Reader
	dec io.Reader
}

// newDecoder returns a decoder of r, to be started.
func newDecoder(r io.Reader) *decoder { return &decoder{src: bufio.NewReader(r)} }

// start reads the header of enc (decodable): a stream starts on its first
// Read, so making one never waits for the upstream.
func (d *decoder) start(enc string) error {
	if strings.EqualFold(strings.TrimSpace(enc), "deflate") {
		// RFC 9110's deflate is zlib; some servers send bare DEFLATE.
		// A zlib header is a DEFLATE method byte and a check that makes
		// the first two bytes a multiple of 31.
		h, err := d.src.Peek(2)
		if err != nil && len(h) < 2 {
			return err
		}
		if h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
			zr, err := zlib.NewReader(d.src)
			if err != nil {
				return err
			}
			d.dec = zr
			return nil
		}
		d.dec = flate.NewReader(d.src)
		return nil
	}
	zr, err := gzip.NewReader(d.src)
	if err != nil {
		return err
	}
	d.dec = zr
	return nil
}

// read reads decoded bytes; at the codec's end it reports bytes that
// follow as errBadEncoding (gzip reads on to a next member itself).
func (d *decoder) read(p []byte) (int, error) {
	n, err := d.dec.Read(p)
	if err == io.EOF {
		if _, e := d.src.ReadByte(); e == nil {
			err = fmt.Errorf("%w: data after its end", errBadEncoding)
		} else if e != io.EOF {
			err = e
		}
	}
	return n, err
}

// decodeAll decodes raw, in enc, to at most limit bytes: errCaptureTooLarge
// past them, an error wrapping errBadEncoding when raw does not decode.
func decodeAll(enc string, raw []byte, limit int) ([]byte, error) {
	d := newDecoder(bytes.NewReader(raw))
	if err := d.start(enc); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadEncoding, err)
	}
	var out bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		n, err := d.read(buf)
		if out.Len()+n > limit {
			return nil, errCaptureTooLarge
		}
		out.Write(buf[:n])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			if !errors.Is(err, errBadEncoding) {
				err = fmt.Errorf("%w: %w", errBadEncoding, err)
			}
			return nil, err
		}
	}
}

// decodedBody is an event stream decoded as it is read.
type decodedBody struct {
	raw io.ReadCloser
	enc string
	d   *decoder
	err error
}

func (b *decodedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.d.dec == nil {
		if err := b.d.start(b.enc); err != nil {
			if err == io.EOF {
				// An empty body encodes nothing.
				b.err = io.EOF
			} else {
				b.err = fmt.Errorf("%w: %w", errBadEncoding, err)
			}
			return 0, b.err
		}
	}
	n, err := b.d.read(p)
	if err != nil && err != io.EOF && !errors.Is(err, errBadEncoding) {
		err = fmt.Errorf("%w: %w", errBadEncoding, err)
	}
	b.err = err
	return n, err
}

func (b *decodedBody) Close() error { return b.raw.Close() }

// decode makes resp's body decoded when the upstream compressed it
// though the gateway asked for no encoding (f.decodes), as the comment at
// the top of this file says. It returns why a whole reply stays encoded
// (errCaptureTooLarge, or an error wrapping errBadEncoding), nil when the
// reply is decoded or was never encoded; an error only when the
// upstream's body could not be read. A file's content (f.download), which
// nothing reads, goes byte for byte, as the upstream sent it.
func decode(resp *http.Response, f *forward) (undecoded, err error) {
	enc := resp.Header.Get("Content-Encoding")
	if !f.decodes || f.download || !encoded(enc) || resp.StatusCode == http.StatusSwitchingProtocols {
		return nil, nil
	}
	if len(resp.Header.Values("Content-Encoding")) > 1 || !decodable(enc) {
		return fmt.Errorf("%w: Content-Encoding %q is not one the gateway reads", errBadEncoding, strings.Join(resp.Header.Values("Content-Encoding"), ", ")), nil
	}
	if eventStream(resp) {
		resp.Body = &decodedBody{raw: resp.Body, enc: enc, d: newDecoder(resp.Body)}
		delete(resp.Header, "Content-Encoding")
		resp.ContentLength = -1
		delete(resp.Header, "Content-Length")
		return nil, nil
	}
	limit := maxCaptureBytes
	if f.models {
		limit = maxModelsBody
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("read upstream reply: %w", err)
	}
	if len(raw) > limit {
		resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(raw), resp.Body), Closer: resp.Body}
		return errCaptureTooLarge, nil
	}
	if len(raw) == 0 {
		resp.Body = readCloser{Reader: bytes.NewReader(nil), Closer: resp.Body}
		return nil, nil
	}
	body, err := decodeAll(enc, raw, limit)
	if err != nil {
		resp.Body = readCloser{Reader: bytes.NewReader(raw), Closer: resp.Body}
		return err, nil
	}
	delete(resp.Header, "Content-Encoding")
	setBody(resp, body)
	return nil, nil
}
