package memory

// Page names one page of a conversation's live messages, in Seq order:
// the first Limit of them after Seq After (0: from the first), or, when
// Backward, the last Limit before Seq Before (none before Seq 1 or 0: the
// walk back is over); all of them for a Limit of 0. A message keeps its
// Seq, so a page read after more were stored, or some superseded, still
// starts where the page before it ended.
type Page struct {
	After, Before int64
	Backward      bool
	Limit         int
}
