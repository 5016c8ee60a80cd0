package record

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// replacement stands in for bytes no store accepts: invalid UTF-8 becomes
// U+FFFD, as encoding/json decodes it.
const replacement = "\uFFFD"

// SanitizeText returns s with its NUL bytes removed and every invalid UTF-8
// sequence replaced by U+FFFD, and whether it changed anything. PostgreSQL
// refuses both in text (SQLSTATE 22021); the gateway stores neither.
func SanitizeText(s string) (string, bool) {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s, false
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, replacement), "\x00", ""), true
}

// SanitizeRaw returns a message's JSON with invalid UTF-8 replaced by
// U+FFFD, raw NUL bytes removed, and \u0000 escapes (which decode to NUL)
// rewritten as \ufffd; and whether it changed anything. Everything else,
// key order and spacing included, is kept byte for byte.
func SanitizeRaw(raw json.RawMessage) (json.RawMessage, bool) {
	nulEscape := []byte(`\u0000`)
	if utf8.Valid(raw) && bytes.IndexByte(raw, 0) < 0 && !bytes.Contains(raw, nulEscape) {
		return raw, false
	}
	out := bytes.ReplaceAll(bytes.ToValidUTF8(raw, []byte(replacement)), []byte{0}, nil)
	// \u0000 is an escape only when the backslash is not itself escaped:
	// an odd run of backslashes ends at it.
	for i := 0; ; {
		j := bytes.Index(out[i:], nulEscape)
		if j < 0 {
			break
		}
		at := i + j
		run := 0
		for k := at; k >= 0 && out[k] == '\\'; k-- {
			run++
		}
		if run%2 == 1 {
			copy(out[at:], `\ufffd`)
		}
		i = at + len(nulEscape)
	}
	return out, !bytes.Equal(out, raw)
}

// SanitizeMessage applies SanitizeText to a message's role and content and
// SanitizeRaw to its JSON, reporting whether anything changed.
func SanitizeMessage(m memory.Message) (memory.Message, bool) {
	var c1, c2, c3 bool
	m.Role, c1 = SanitizeText(m.Role)
	m.Content, c2 = SanitizeText(m.Content)
	if len(m.Raw) > 0 {
		m.Raw, c3 = SanitizeRaw(m.Raw)
	}
	return m, c1 || c2 || c3
}

// SanitizeExchange sanitizes every message of ex and its model, on copies
// of its slices, and reports how many fields it changed. Capture calls it
// before anything is queued or stored; a proxy that parses requests can
// call it (or SanitizeMessage) at the edge too.
func SanitizeExchange(ex memory.Exchange) (memory.Exchange, int) {
	n := 0
	clean := func(msgs []memory.Message) []memory.Message {
		if msgs == nil {
			return nil
		}
		out := make([]memory.Message, len(msgs))
		for i, m := range msgs {
			var changed bool
			if out[i], changed = SanitizeMessage(m); changed {
				n++
			}
		}
		return out
	}
	ex.Prior = clean(ex.Prior)
	ex.Turn = clean(ex.Turn)
	var changed bool
	if ex.Reply, changed = SanitizeMessage(ex.Reply); changed {
		n++
	}
	if ex.Partial != nil {
		partial := *ex.Partial
		if partial, changed = SanitizeMessage(partial); changed {
			n++
		}
		ex.Partial = &partial
	}
	if ex.Model, changed = SanitizeText(ex.Model); changed {
		n++
	}
	if ex.RequestID, changed = SanitizeText(ex.RequestID); changed {
		n++
	}
	return ex, n
}
