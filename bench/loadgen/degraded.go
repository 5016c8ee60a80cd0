package loadgen

import (
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// DegradedHeader is the response header in which memgate lists, comma
// separated, the memory parts it left out of a request's prompt because
// they did not load in time (memory.DegradedHistory and the others; store
// and all mean none of memory was used). It is absent when all of memory
// loaded.
const DegradedHeader = "X-Memory-Degraded"

// DegradedParts reads a DegradedHeader value: whether the conversation's
// history was left out of the prompt (the history part, or all of memory:
// store, all), and whether any part was.
func DegradedParts(header string) (history, anyPart bool) {
	for part := range strings.SplitSeq(header, ",") {
		switch strings.TrimSpace(part) {
		case "":
		case memory.DegradedHistory, memory.DegradedStore, memory.DegradedAll:
			history, anyPart = true, true
		default:
			anyPart = true
		}
	}
	return history, anyPart
}

// DegradedShare is the share of the successful requests whose response
// named a part of memory in DegradedHeader.
func (r Result) DegradedShare() float64 { return share(r.Degraded, r.Requests) }

// DegradedHistoryShare is the share of the successful requests whose
// response said the conversation's history was left out.
func (r Result) DegradedHistoryShare() float64 { return share(r.DegradedHistory, r.Requests) }

// share is n ÷ of, or 0 when of is 0.
func share(n, of uint64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}
