package memory

import "strings"

// PassageTurn is one turn a recalled passage shows (Item.Turns): recall
// renders a passage from its turns (PassageText), and the assembler renders
// it again without the turns the prompt shows already.
type PassageTurn struct {
	// Key is the message's key in the item's conversation.
	Key  string
	Role string
	// Text is what the passage shows of the turn, followed by an
	// ellipsis when Clipped.
	Text    string
	Clipped bool
	// Hit: the turn is one of the passage's hits, which it is shown
	// around.
	Hit bool
	// Whole is the turn's whole text, trimmed: what a message in view is
	// compared with.
	Whole string
}

// PassageEllipsis ends a passage turn's clipped text.
const PassageEllipsis = " …"

// passageIndent starts each line of a passage's turn after its first (see
// IndentBreaks): one space, which costs no token.
const passageIndent = " "

// PassageText renders turns as a passage: one "role: text" line each, in
// order. A turn's own line breaks are indented, so only PassageText starts
// a line with a role (a message cannot forge another turn, or the block's
// layout).
func PassageText(turns []PassageTurn) string {
	size := 0
	for _, t := range turns {
		size += len("\n") + len(t.Role) + len(": ") + len(t.Text)
		if t.Clipped {
			size += len(PassageEllipsis)
		}
	}
	var b strings.Builder
	b.Grow(max(0, size-len("\n")))
	for _, t := range turns {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(t.Role)
		b.WriteString(": ")
		b.WriteString(IndentBreaks(t.Text, passageIndent))
		if t.Clipped {
			b.WriteString(PassageEllipsis)
		}
	}
	return b.String()
}
