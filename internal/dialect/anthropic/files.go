package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/sse"
	"github.com/memgate/memgate/internal/memory"
)

// A run of the code execution tool saves the files its code writes in
// the provider's Files API and names them in its result (the file_id of
// each output of a code_execution_tool_result or
// bash_code_execution_tool_result); a later request may name such a file
// by id for the model to read (a document's or an image's source of type
// file, a container_upload). With one provider key for every tenant the
// provider cannot tell whose it is: memgate binds each file a reply
// names to its caller (ReplyStates, StateStream) and checks those a
// request names (States).

// readFiles returns the Files API ids the messages of the body b name,
// each value of a file_id member anywhere in them (each messages member
// of the body's, should it give two; a member given twice gives each of
// its values), by exact names once unescaped, as the provider reads
// them, save what a tool's input holds (the input of a tool_use block is
// the model's arguments to a tool, no file the provider reads). A
// file_id that is not a string names none: the provider refuses it. A
// body whose messages cannot be read to the end (it was read whole
// already: never) names the id "", which no one owns.
func readFiles(b []byte) []string {
	if !mayNameFile(b) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var ids []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return append(ids, "")
		}
		if tok == "messages" {
			ids, err = filesIn(dec, ids)
		} else {
			err = body.Skip(dec)
		}
		if err != nil {
			return append(ids, "")
		}
	}
	return ids
}

// filesIn appends to ids the file ids the next value of dec names
// (readFiles), read token by token.
func filesIn(dec *json.Decoder, ids []string) ([]string, error) {
	var objects []bool // the values it is in: true for an object
	wantKey := false   // the next token is a key of the innermost object
	for {
		tok, err := dec.Token()
		if err != nil {
			return ids, err
		}
		if key, ok := tok.(string); ok && wantKey {
			switch key {
			case "file_id":
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					return ids, err
				}
				var id string
				if json.Unmarshal(v, &id) == nil {
					ids = append(ids, id)
				}
			case "input":
				if err := body.Skip(dec); err != nil {
					return ids, err
				}
			default:
				wantKey = false
				continue
			}
			wantKey = true // the member's value was read
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			objects = append(objects, tok == json.Delim('{'))
			wantKey = tok == json.Delim('{')
			continue
		case json.Delim('}'), json.Delim(']'):
			objects = objects[:len(objects)-1]
		}
		if len(objects) == 0 {
			return ids, nil // the value ended
		}
		wantKey = objects[len(objects)-1]
	}
}

// mayNameFile reports whether b may give a member named file_id, told
// by a byte scan, a small part of what reading b token by token costs
// (some 60 MB/s): b gives the name as a member's ("file_id" opened by a
// quote not escaped, then a colon; the name in a message's text, where
// its quotes are escaped, is not), or a \u escape of one of its letters
// (the only escape that writes a letter).
func mayNameFile(b []byte) bool {
	name := []byte(`"file_id"`)
	for i := 0; ; {
		j := bytes.Index(b[i:], name)
		if j < 0 {
			break
		}
		i += j
		if !escapedAt(b, i) && colonAt(b, i+len(name)) {
			return true
		}
		i++
	}
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`\u00`))
		if j < 0 || i+j+6 > len(b) {
			return false
		}
		i += j
		switch string(bytes.ToLower(b[i+4 : i+6])) {
		case "66", "69", "6c", "65", "5f", "64": // f i l e _ d
			return true
		}
		i++
	}
}

// escapedAt reports whether the byte of b at i is escaped: an odd run of
// backslashes comes before it.
func escapedAt(b []byte, i int) bool {
	n := 0
	for i > 0 && b[i-1] == '\\' {
		n++
		i--
	}
	return n%2 == 1
}

// colonAt reports whether b holds a colon at i, after JSON whitespace.
func colonAt(b []byte, i int) bool {
	for ; i < len(b); i++ {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b[i] == ':'
	}
	return false
}

// codeExecutionResults are the types of the reply blocks that name the
// files a run of the code execution tool wrote.
var codeExecutionResults = map[string]bool{"code_execution_tool_result": true, "bash_code_execution_tool_result": true}

// blockFiles returns the files a reply's content block names: the
// outputs of a code execution result (its content's content, each
// output's file_id); none for any other block, a tool's input included.
func blockFiles(raw json.RawMessage) []memory.ProviderState {
	var b struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &b) != nil || !codeExecutionResults[b.Type] {
		return nil
	}
	var res struct {
		Content json.RawMessage `json:"content"`
	}
	var outs []struct {
		FileID json.RawMessage `json:"file_id"`
	}
	if json.Unmarshal(b.Content, &res) != nil || json.Unmarshal(res.Content, &outs) != nil {
		return nil // an error, or no outputs
	}
	var out []memory.ProviderState
	for _, o := range outs {
		var id string
		if json.Unmarshal(o.FileID, &id) == nil && id != "" {
			out = append(out, memory.ProviderState{Kind: memory.StateFile, ID: id})
		}
	}
	return out
}

// containerJSON is the part of a reply, or of a stream event's message
// or delta, naming the container it ran in.
type containerJSON struct {
	Container *struct {
		ID string `json:"id"`
	} `json:"container"`
}

// states is the container c names, if any.
func (c containerJSON) states() []memory.ProviderState {
	if c.Container == nil || c.Container.ID == "" {
		return nil
	}
	return []memory.ProviderState{{Kind: memory.StateContainer, ID: c.Container.ID}}
}

// ReplyStates returns the provider states a whole Messages reply names:
// the container it ran in and the files its code execution wrote.
func ReplyStates(b []byte) ([]memory.ProviderState, error) {
	var r struct {
		containerJSON
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	out := r.states()
	for _, c := range r.Content {
		out = append(out, blockFiles(c)...)
	}
	return out, nil
}

// StateStream reads the provider states a streamed Messages reply of any
// length names from its events as they are relayed, in whatever pieces:
// the container it ran in (message_start's message, message_delta's
// delta) and the files its code execution wrote (a code execution
// result, which comes whole in its content_block_start); fn is called
// with the states each event names as soon as it completes, and with
// final once message_stop was read. An event that may name the
// container larger than limit bytes stops it (every later Write fails);
// a content_block_start larger than that is skipped (the files it names
// stay unbound, which refuses them); the other events are not decoded.
// It is used by one goroutine.
type StateStream struct {
	dec   *sse.Decoder
	limit int64
	fn    func(sts []memory.ProviderState, final bool)
}

// NewStateStream returns a StateStream calling fn, holding about twice
// limit bytes.
func NewStateStream(limit int64, fn func(sts []memory.ProviderState, final bool)) *StateStream {
	s := &StateStream{limit: limit, fn: fn}
	s.dec = sse.NewEventDecoder(limit, s.event)
	return s
}

// Write reads p, a piece of the stream.
func (s *StateStream) Write(p []byte) (int, error) { return s.dec.Write(p) }

func (s *StateStream) event(ev sse.Event) error {
	switch ev.Type {
	case "message_stop":
		s.fn(nil, true)
		return nil
	case "content_block_start":
		if ev.TooLarge {
			return nil
		}
	case "message_start", "message_delta", "message":
		if ev.TooLarge {
			return fmt.Errorf("a %.64s event is larger than %d bytes", ev.Type, s.limit)
		}
	default:
		return nil
	}
	var e struct {
		Type         string          `json:"type"`
		Message      containerJSON   `json:"message"`
		Delta        containerJSON   `json:"delta"`
		ContentBlock json.RawMessage `json:"content_block"`
	}
	if json.Unmarshal(ev.Data, &e) != nil {
		return nil
	}
	var sts []memory.ProviderState
	switch e.Type {
	case "message_start":
		sts = e.Message.states()
	case "message_delta":
		sts = e.Delta.states()
	case "content_block_start":
		sts = blockFiles(e.ContentBlock)
	case "message_stop":
		s.fn(nil, true)
		return nil
	}
	if len(sts) > 0 {
		s.fn(sts, false)
	}
	return nil
}

// ReplyReader relays a whole Messages reply too large to hold, byte for
// byte, and reads what it names as it goes (as ReplyStates does of a
// reply held whole: its container, the files its code execution wrote),
// handing each on before any byte naming it is read from the
// ReplyReader: a body.Reader over the reply's container member and its
// content, one member or one content block at a time. A block larger
// than its limit stops the reading (what the reply names from there on
// is never handed on). It is used by one goroutine.
type ReplyReader struct {
	*body.Reader
}

// NewReplyReader returns a ReplyReader relaying src, which calls fn with
// the states it finds before the bytes naming them are read from it
// (final once the reply was read whole, with what is left, possibly
// nothing), or fail once it stops reading: a value over limit bytes, a
// reply over total bytes or that is not a JSON object, a container that
// is not an object.
func NewReplyReader(src io.Reader, limit, total int64, fn func(sts []memory.ProviderState, final bool), fail func(error)) *ReplyReader {
	return &ReplyReader{body.NewReader(src, limit, total, &replyVisitor{fn: fn}, fail)}
}

// replyVisitor reads a reply's container and content blocks
// (body.Visitor), as ReplyStates does.
type replyVisitor struct {
	fn    func(sts []memory.ProviderState, final bool)
	found []memory.ProviderState // read and not yet handed on
}

func (v *replyVisitor) Member(key string, dec *json.Decoder) (bool, error) {
	switch {
	case strings.EqualFold(key, "container"): // encoding/json's match, as containerJSON's
		var c containerJSON
		if err := dec.Decode(&c.Container); err != nil {
			return false, err
		}
		v.found = append(v.found, c.states()...)
		return false, nil
	case strings.EqualFold(key, "content"):
		return true, nil
	}
	return false, body.Skip(dec)
}

func (v *replyVisitor) Element(dec *json.Decoder) error {
	var b json.RawMessage
	if err := dec.Decode(&b); err != nil {
		return err
	}
	v.found = append(v.found, blockFiles(b)...)
	return nil
}

func (v *replyVisitor) Found() bool { return len(v.found) > 0 }

func (v *replyVisitor) Flush(final bool) {
	v.fn(v.found, final)
	v.found = nil
}
