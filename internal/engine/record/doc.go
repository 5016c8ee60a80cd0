// Package record persists chat exchanges without delaying the client: it
// reassembles the upstream's reply (ReplyFromJSON, StreamReply), redacts
// secrets, hands each exchange to a durable queue in the background
// (Capturer), and drains that queue into the store (Worker) with at-least-once
// delivery and idempotent saves.
package record
