// Package record persists chat exchanges without delaying the client: it
// takes an exchange whose reply the dialect adapter already read (see
// internal/dialect), redacts secrets, hands each exchange to a durable queue in the background
// (Capturer), and drains that queue into the store (Worker) with at-least-once
// delivery and idempotent saves. It is the durable write path only: what
// runs after a save (fact extraction, summaries, indexing) is queued as an
// Enrichment for engine/enrich, which runs it. Because it owns what a
// stored message looks like (sanitized, redacted), it also places a
// request of a derived conversation in the branch its resent history
// continues (Router), comparing that history as it would be stored.
package record
