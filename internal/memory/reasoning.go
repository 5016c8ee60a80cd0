package memory

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A reply's signed reasoning (Anthropic's thinking blocks, OpenRouter's
// reasoning_details) goes back to its provider only as the provider gave
// it: the provider checks a signature over it, or decrypts it. What
// storing may change in it — the redactor replacing a secret, the store
// sanitizing a NUL or invalid UTF-8 into U+FFFD — makes the provider
// refuse the request. Capture therefore stores beside it its digest as
// received (ReasoningDigest), and replay sends it back only while it still
// has that digest (ReasoningIntact).

// ReasoningDigest returns the digest of the signed reasoning raw, a JSON
// value: the hex SHA-256 of its value encoded canonically (encoding/json
// of the decoded value: members sorted, no spaces, one escaping), so
// re-encoding it does not change the digest and changing any of its
// strings does. It returns "" when raw is not JSON, or when decoding it
// is lossy (Lossless): its U+FFFD would be memgate's, not the provider's.
func ReasoningDigest(raw []byte) string {
	if !Lossless(raw) {
		return ""
	}
	return canonicalDigest(raw)
}

// canonicalDigest is ReasoningDigest without the lossless check.
func canonicalDigest(raw []byte) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ReasoningIntact reports whether the stored signed reasoning raw is as
// its provider gave it. With the digest stored beside it, that is
// whether raw still has that digest: a U+FFFD or a "[redacted:" the
// provider wrote itself is kept. Without one (stored before digests were,
// or sent so by a client), it is whether none of its strings holds what
// storing puts in place of what it changes — the redactor's mark or
// U+FFFD — the safe side.
func ReasoningIntact(raw []byte, digest string) bool {
	if digest != "" {
		return canonicalDigest(raw) == digest
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	return !alteredValue(v)
}

// alteredValue reports whether a string of the decoded JSON value v holds
// the redactor's mark or U+FFFD.
func alteredValue(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, redactedMark) || strings.ContainsRune(v, utf8.RuneError)
	case []any:
		for _, e := range v {
			if alteredValue(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if alteredValue(k) || alteredValue(e) {
				return true
			}
		}
	}
	return false
}

// redactedMark starts what the redactor (internal/redact) puts in place of
// a secret.
const redactedMark = "[redacted:"

// Lossless reports whether encoding/json decodes the JSON text raw to
// exactly what it says: raw is valid UTF-8 and has no surrogate escape
// (\ud800-\udfff) that is not half of a pair, each of which decodes to
// U+FFFD. An escaped backslash before "u" counts as an escape: the
// doubt goes to the safe side.
func Lossless(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for rest := raw; ; {
		i := bytes.Index(rest, []byte(`\u`))
		if i < 0 {
			return true
		}
		rest = rest[i+2:]
		r, ok := surrogate(rest)
		if !ok {
			continue
		}
		if r >= 0xDC00 { // a low half first
			return false
		}
		lo, ok := surrogate(bytes.TrimPrefix(rest[4:], []byte(`\u`)))
		if !ok || lo < 0xDC00 || !bytes.HasPrefix(rest[4:], []byte(`\u`)) {
			return false
		}
		rest = rest[10:]
	}
}

// surrogate reads the four hexadecimal digits b starts with, when they
// are a UTF-16 surrogate.
func surrogate(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	r, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(r), err == nil && 0xD800 <= r && r <= 0xDFFF
}
