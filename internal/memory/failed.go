package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// FailedField is the member memgate adds to the stored message object of a
// reply the upstream broke off (a mid-stream error event): the part that was
// streamed is kept, for the record, but such a message is never sent back
// upstream as if it had been said. Its value is the upstream's error message.
const FailedField = "memgate_failed"

// failedMarker is FailedField as it appears in a message object.
var failedMarker = []byte(`"` + FailedField + `"`)

// Failed reports whether m is a reply the upstream broke off (see
// FailedField).
func (m Message) Failed() bool {
	if !bytes.Contains(m.Raw, failedMarker) {
		return false
	}
	var w map[string]json.RawMessage
	if json.Unmarshal(m.Raw, &w) != nil {
		return false
	}
	v, ok := w[FailedField]
	return ok && string(bytes.TrimSpace(v)) != "null" && string(bytes.TrimSpace(v)) != "false"
}

// maxFailedReason caps the error message MarkFailed keeps.
const maxFailedReason = 512

// MarkFailed returns m with FailedField set to reason (its first 512
// bytes) in its Raw.
func MarkFailed(m Message, reason string) (Message, error) {
	var w map[string]json.RawMessage
	if err := json.Unmarshal(m.Raw, &w); err != nil {
		return m, fmt.Errorf("%w: mark failed: %v", ErrInvalid, err)
	}
	if reason == "" {
		reason = "upstream error"
	}
	if len(reason) > maxFailedReason {
		reason = reason[:maxFailedReason]
	}
	r, err := json.Marshal(reason)
	if err != nil {
		return m, fmt.Errorf("%w: mark failed: %v", ErrInvalid, err)
	}
	w[FailedField] = r
	raw, err := json.Marshal(w)
	if err != nil {
		return m, fmt.Errorf("%w: mark failed: %v", ErrInvalid, err)
	}
	m.Raw = raw
	return m, nil
}

// The memory parts a request can be degraded by (Prepared.Degraded, the
// X-Memory-Degraded header, the degraded metric's label).
const (
	// DegradedHistory: the conversation's stored recent turns did not load.
	DegradedHistory = "history"
	// DegradedSummary: the conversation's summary did not load.
	DegradedSummary = "summary"
	// DegradedFacts: the user's pinned facts did not load.
	DegradedFacts = "facts"
	// DegradedRecall: recall (passages and ranked facts) failed or was late.
	DegradedRecall = "recall"
	// DegradedEmbedding: the query's embedding was late; recall used
	// full-text results only.
	DegradedEmbedding = "embedding"
	// DegradedStore: the memory store is not connected; nothing was loaded.
	DegradedStore = "store"
	// DegradedCapture: the request resent more history than one request
	// stores (capture.max_history_messages): its older messages, past the
	// first ones, are not stored; or a whole reply went to the client
	// before its turn was durable (neither stored nor queued within
	// record.Options.SaveWait, or dropped).
	DegradedCapture = "capture"
	// DegradedTranscripts: the prints of the user's newest exchanges that
	// the gateway processes share (Redis) did not load: the request was
	// checked for one about the chat (X-Memory-Auxiliary) against this
	// process's own prints only.
	DegradedTranscripts = "transcripts"
	// DegradedNewChat: whether the user was seen resending their history
	// by another gateway process (the signal they share through Redis)
	// did not load: a request that landed in the default conversation
	// without earlier turns was taken for a turn of it, with its recent
	// turns and summary, as a newest-only client's is (see
	// Request.NewChat); a new chat's first turn got them too.
	DegradedNewChat = "newchat"
	// DegradedBackground: the store every gateway process shares did
	// not take (or answer about) a background response's exchange: it is
	// held in the process that forwarded the request only, and stored
	// only when a GET reaching that process, before it restarts, returns
	// the response done.
	DegradedBackground = "background"
	// DegradedAll: preparing the prompt failed as a whole; the client's
	// messages went upstream unchanged.
	DegradedAll = "all"
)
