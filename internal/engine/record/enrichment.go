package record

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Enrichment is an entry of the enrichment queue: a stored exchange and
// what storing it changed. The write path (Capturer, Worker) encodes it
// after each save; engine/enrich decodes and enriches it.
type Enrichment struct {
	Exchange memory.Exchange   `json:"exchange"`
	Result   memory.SaveResult `json:"result"`
	// CapturedAt is when the exchange was handed to the Capturer (zero when
	// unknown: the enrichment lag then runs from the exchange's At). An
	// imported or dated exchange's At is when it was said, long before.
	CapturedAt time.Time `json:"captured_at,omitzero"`
}

// EncodeEnrichment encodes a stored exchange for the enrichment queue. Of
// the client's resent history (Prior) it keeps only the messages the save
// stored (the hooks index exactly those), and none of a partial reply the
// exchange went on with (Partial), so an entry stays small however much
// history the client sends.
func EncodeEnrichment(ex memory.Exchange, res memory.SaveResult) ([]byte, error) {
	return encodeEnrichment(ex, res, time.Time{})
}

// encodeEnrichment is EncodeEnrichment for an exchange captured at
// capturedAt (zero: unknown).
func encodeEnrichment(ex memory.Exchange, res memory.SaveResult, capturedAt time.Time) ([]byte, error) {
	keep := min(len(ex.Prior), max(0, res.Inserted-len(ex.Turn)-1))
	ex.Prior = ex.Prior[len(ex.Prior)-keep:]
	ex.Partial = nil // adoption's alone: the save stored the joined reply in its place
	b, err := json.Marshal(Enrichment{Exchange: ex, Result: res, CapturedAt: capturedAt})
	if err != nil {
		return nil, fmt.Errorf("encode enrichment: %w", err)
	}
	return b, nil
}

// DecodeEnrichment decodes an entry of the enrichment queue. An entry that
// is not JSON, or carries no exchange id, is an error wrapping
// memory.ErrInvalid.
func DecodeEnrichment(payload []byte) (Enrichment, error) {
	var en Enrichment
	if err := json.Unmarshal(payload, &en); err != nil {
		return Enrichment{}, fmt.Errorf("decode enrichment: %w: %w", memory.ErrInvalid, err)
	}
	if en.Exchange.ID == "" {
		return Enrichment{}, fmt.Errorf("decode enrichment: no exchange id: %w", memory.ErrInvalid)
	}
	return en, nil
}
