package search

import (
	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
)

// WindowReads gathers what a store's ReadWindows reads, one row at a time,
// into the windows and closed flags itemindex.Source.ReadWindows returns.
type WindowReads struct {
	radius int
	// Read and Closed are ReadWindows' results.
	Read   map[itemindex.WindowKey][]memory.Message
	Closed map[itemindex.WindowKey]bool
}

// NewWindowReads returns an empty WindowReads for windows of radius turns
// around refs refs.
func NewWindowReads(radius, refs int) *WindowReads {
	return &WindowReads{radius: radius, Read: make(map[itemindex.WindowKey][]memory.Message, refs), Closed: make(map[itemindex.WindowKey]bool, refs)}
}

// Add records turn m, read within the radius of the message hitKey of m's
// conversation, stored at seq hitSeq. A superseded turn, or one whose raw JSON (marked; nil when it
// cannot be one) says it is a reply the upstream broke off, is left out,
// but still makes the hit a stored message and closes its window when it
// is the window's last seq.
func (w *WindowReads) Add(hitKey string, hitSeq int64, m memory.Message, superseded bool, marked []byte) {
	k := itemindex.WindowKey{Ref: memory.MessageRef{Conversation: m.Conversation, Key: hitKey}, Radius: w.radius}
	if m.Seq == hitSeq+int64(w.radius) {
		w.Closed[k] = true
	}
	if _, ok := w.Read[k]; !ok {
		w.Read[k] = nil // a stored message, even when nothing of it is live
	}
	if superseded || (marked != nil && (memory.Message{Raw: marked}).Failed()) {
		return
	}
	w.Read[k] = append(w.Read[k], m)
}
