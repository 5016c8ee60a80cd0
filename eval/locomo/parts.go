package locomo

import "strings"

// Message is one message of a prompt: its role and text.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// The parts of a prompt, in report order.
const (
	PartSystem  = "app system prompt"
	PartHeader  = "memory block framing"
	PartPinned  = "pinned"
	PartSummary = "summary"
	PartFacts   = "facts"
	PartRecall  = "recalled passages"
	PartRecent  = "recent turns"
	PartCurrent = "current turn"
)

// Parts lists the parts in report order.
var Parts = []string{PartSystem, PartHeader, PartPinned, PartSummary, PartFacts, PartRecall, PartRecent, PartCurrent}

// Split returns the text of each part of prompt: the memory block
// (<memory>…</memory>, wherever it is) split by its section headings
// (a line ending with ":" naming pinned facts, a summary, facts or recalled
// messages; lines before the first heading and the tags are framing), the
// other text of system and developer messages (the app's own), the other
// text of user and assistant messages before the last user message (recent
// turns), and the last user message (the current turn).
func Split(prompt []Message) map[string]string {
	parts := map[string]*strings.Builder{}
	add := func(part, text string) {
		if text == "" {
			return
		}
		b, ok := parts[part]
		if !ok {
			b = &strings.Builder{}
			parts[part] = b
		}
		b.WriteString(text)
		b.WriteByte('\n')
	}
	last := -1
	for i := len(prompt) - 1; i >= 0; i-- {
		if prompt[i].Role == "user" {
			last = i
			break
		}
	}
	for i, m := range prompt {
		if i == last {
			add(PartCurrent, m.Content)
			continue
		}
		own := PartRecent
		if m.Role == "system" || m.Role == "developer" {
			own = PartSystem
		}
		rest := m.Content
		for {
			start := strings.Index(rest, "<memory>")
			if start < 0 {
				break
			}
			end := strings.Index(rest[start:], "</memory>")
			if end < 0 {
				end = len(rest) - start
			} else {
				end += len("</memory>")
			}
			add(own, strings.TrimSpace(rest[:start]))
			splitBlock(rest[start:start+end], add)
			rest = rest[start+end:]
		}
		add(own, strings.TrimSpace(rest))
	}
	out := make(map[string]string, len(parts))
	for k, b := range parts {
		out[k] = strings.TrimSuffix(b.String(), "\n")
	}
	return out
}

// splitBlock hands each section of a memory block to add, headings and
// framing included in PartHeader.
func splitBlock(block string, add func(part, text string)) {
	part := PartHeader
	for _, line := range strings.Split(block, "\n") {
		if h, ok := heading(line); ok {
			part = h
			add(PartHeader, line)
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "<") && strings.HasSuffix(strings.TrimSpace(line), "memory>") {
			add(PartHeader, line)
			continue
		}
		add(part, line)
	}
}

// heading reports which part a section heading line opens.
func heading(line string) (string, bool) {
	l := strings.ToLower(strings.TrimSpace(line))
	if !strings.HasSuffix(l, ":") || strings.HasPrefix(l, "- ") || len(l) > 120 {
		return "", false
	}
	switch {
	case strings.HasPrefix(l, "pinned"):
		return PartPinned, true
	case strings.HasPrefix(l, "summary"):
		return PartSummary, true
	case strings.HasPrefix(l, "facts"):
		return PartFacts, true
	case strings.HasPrefix(l, "recalled"), strings.Contains(l, "earlier messages"):
		return PartRecall, true
	}
	return "", false
}

// PrefixShare returns the share of cur's bytes that repeat prev from the
// first byte: the length of their common prefix over len(cur) (0 for an
// empty cur).
func PrefixShare(prev, cur string) float64 {
	if len(cur) == 0 {
		return 0
	}
	n := min(len(prev), len(cur))
	i := 0
	for i < n && prev[i] == cur[i] {
		i++
	}
	return float64(i) / float64(len(cur))
}

// The places a prompt stops repeating the previous one (PrefixBreak),
// besides the parts.
const (
	// BreakNone: the prompt is the previous one, or starts with all of it.
	BreakNone = "none (the previous prompt repeats whole)"
)

// PrefixBreak names the part of cur where it stops repeating prev: the
// part (Parts) of the first message that differs, and, inside a memory
// block, the section of its first differing line (PartHeader for the
// framing). Where prev had a memory block and cur has another message
// (the previous request's recalled block is not sent again), it is that
// block's section. A cur that starts with every message of prev gives
// BreakNone.
func PrefixBreak(prev, cur []Message) string {
	i := 0
	for i < len(prev) && i < len(cur) && prev[i] == cur[i] {
		i++
	}
	if i == len(prev) || i == len(cur) {
		return BreakNone
	}
	m, was := cur[i], prev[i].Content
	if !strings.Contains(m.Content, "<memory>") && strings.Contains(was, "<memory>") {
		// The block is gone: its first section names it.
		for _, line := range strings.Split(was, "\n") {
			if h, ok := heading(line); ok {
				return h
			}
		}
		return PartHeader
	}
	if strings.Contains(m.Content, "<memory>") {
		wasLines := strings.Split(was, "\n")
		part := PartHeader
		for j, line := range strings.Split(m.Content, "\n") {
			if h, ok := heading(line); ok {
				part = h
			}
			if j >= len(wasLines) || wasLines[j] != line {
				return part
			}
		}
		return part
	}
	last := -1
	for j := len(cur) - 1; j >= 0; j-- {
		if cur[j].Role == "user" {
			last = j
			break
		}
	}
	switch {
	case i == last:
		return PartCurrent
	case m.Role == "system" || m.Role == "developer":
		return PartSystem
	}
	return PartRecent
}
