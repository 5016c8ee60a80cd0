// Package enrich is where the work after a save runs, off the path of
// every request and every save. The Enricher drains the enrichment queue
// that engine/record fills with each stored exchange and runs the
// after-save hooks over it in paced rounds: fact extraction (engine/recall,
// through CoalesceTurns), indexing for recall, and compaction — the hooks
// that call a side model in a lane of their own (side.go), so that a side
// model that hangs never holds up indexing. Compaction
// lives here too: it keeps long conversations within budget with rolling
// summaries of the messages that leave the recent window, and pinned
// facts — goals, limits, preferences and decisions the user stated — that
// are never compressed away.
package enrich
