package responses

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/memgate/memgate/internal/dialect/sse"
)

// errHeadRead stops the decoding of a stream's head at its first event.
var errHeadRead = errors.New("stream head read")

// StreamHead reads src up to the end of its first event, at most about
// limit bytes, and returns what it read and the id of the response that
// event created ("" when it is no response.created event naming one, or
// none ended within limit). The caller relays head, then the rest of src.
// err is src's error, io.EOF included, when it came before the event's end.
func StreamHead(src io.Reader, limit int) (head []byte, id string, err error) {
	found := false
	dec := sse.NewDecoder(int64(limit), func(ev sse.Event) error {
		var e struct {
			Type     string `json:"type"`
			Response *struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		if json.Unmarshal(ev.Data, &e) == nil && e.Type == "response.created" && e.Response != nil {
			id = e.Response.ID
		}
		found = true
		return errHeadRead
	})
	buf := make([]byte, 4<<10)
	for !found && len(head) < limit {
		n, rerr := src.Read(buf)
		head = append(head, buf[:n]...)
		if _, werr := dec.Write(buf[:n]); werr != nil && !found {
			return head, "", nil // past the limit, or not an event stream
		}
		if rerr != nil && !found {
			return head, "", rerr
		}
	}
	return head, id, nil
}
