package encoder

import (
	"context"
	"fmt"
	"time"
)

// Embedder is a Model behind memgate's embedder contract (recall.Embedder):
// Embed with a context and an error, Model and Dims; and EmbedOn, one
// call spread over several cores (recall.InProcess). It bounds nothing
// itself: recall.Bounded limits how many cores its calls take.
type Embedder struct {
	m *Model
}

// NewEmbedder returns m as an embedder.
func NewEmbedder(m *Model) *Embedder { return &Embedder{m: m} }

// Embed returns one vector per text. It fails only when ctx has ended
// before it starts. It ignores by (the caller's deadline): recall.Bounded
// decides whether a call waits.
func (e *Embedder) Embed(ctx context.Context, texts []string, _ time.Time) ([][]float32, error) {
	return e.EmbedOn(ctx, texts, 1)
}

// EmbedOn is Embed with the call's products split over up to cores
// goroutines (see Model.EmbedOn): for a caller that holds that many
// cores for it.
func (e *Embedder) EmbedOn(ctx context.Context, texts []string, cores int) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	return e.m.EmbedOn(texts, cores), nil
}

// Model returns the model's name (ModelName).
func (e *Embedder) Model() string { return ModelName }

// Dims returns the vector dimension (Dims).
func (e *Embedder) Dims() int { return Dims }
