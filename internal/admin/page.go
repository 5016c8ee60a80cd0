package admin

import (
	"context"
	"net/url"
	"strconv"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/memory"
)

// Bounds of a page of a conversation's live messages (GET
// /v1/memory/conversations/{id}, the inspector's conversation page): a
// conversation of 20,000 messages answered whole took 4 s of a core, 665
// MB allocated and a 104 MB answer (BenchmarkGetLongConversation).
const (
	// DefaultPageMessages is a page's size when the request names none.
	DefaultPageMessages = 100
	// MaxPageMessages is the largest page a request may ask for.
	MaxPageMessages = 1000
	// MaxPageBytes ends a page early, before the message whose JSON
	// (escapes included: encodedSize) would take the page past it (a page
	// holds one message at least), so an answer stays under about this
	// size however long its messages and whatever their characters.
	MaxPageBytes = 4 << 20
)

// Pager reads a page of a conversation (admin.Store's ConversationPage).
type Pager interface {
	ConversationPage(ctx context.Context, id memory.Identity, p memory.Page) (memory.Conversation, []memory.Message, error)
}

// MessagePage is one page of a conversation's live messages, in Seq order.
// HasMore says whether more follow in the page's direction: after its last
// message for a page read forward, before its first for one read
// backward (memory.Page's Backward).
type MessagePage struct {
	Conversation memory.Conversation
	Messages     []memory.Message
	HasMore      bool
}

// ReadPage reads the page p names (its Limit between 1 and
// MaxPageMessages), ended early at MaxPageBytes.
func ReadPage(ctx context.Context, st Pager, id memory.Identity, p memory.Page) (MessagePage, error) {
	want := p.Limit
	p.Limit++ // one more says whether more follow
	conv, msgs, err := st.ConversationPage(ctx, id, p)
	if err != nil {
		return MessagePage{}, err
	}
	page := MessagePage{Conversation: conv, Messages: msgs}
	backward := p.Backward
	if len(msgs) > want {
		page.HasMore = true
		if backward {
			msgs = msgs[len(msgs)-want:]
		} else {
			msgs = msgs[:want]
		}
	}
	// Keep the messages nearest the cursor within MaxPageBytes.
	size, n := 0, 0
	for n < len(msgs) {
		m := msgs[n]
		if backward {
			m = msgs[len(msgs)-1-n]
		}
		mSize := encodedSize(m)
		if n > 0 && size+mSize > MaxPageBytes {
			page.HasMore = true
			break
		}
		size += mSize
		n++
	}
	if backward {
		msgs = msgs[len(msgs)-n:]
	} else {
		msgs = msgs[:n]
	}
	if msgs == nil {
		msgs = []memory.Message{}
	}
	page.Messages = msgs
	return page, nil
}

// ParsePage reads a page's query parameters: limit (1 to
// MaxPageMessages, DefaultPageMessages when absent), and after or before
// (a message's seq; not both), each a 400 naming it when invalid. A before
// of 0 or 1 names the empty page before the first message.
func ParsePage(q url.Values) (memory.Page, *apierr.Error) {
	p := memory.Page{Limit: DefaultPageMessages}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageMessages {
			return p, apierr.Invalid("limit", "limit must be a whole number from 1 to "+strconv.Itoa(MaxPageMessages)+".")
		}
		p.Limit = n
	}
	for _, c := range []struct {
		name string
		to   *int64
	}{{"after", &p.After}, {"before", &p.Before}} {
		v := q.Get(c.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return p, apierr.Invalid(c.name, c.name+" must be a message's seq, a whole number.")
		}
		*c.to = n
	}
	if q.Get("after") != "" && q.Get("before") != "" {
		return p, apierr.Invalid("before", "Give after or before, not both.")
	}
	p.Backward = q.Get("before") != ""
	return p, nil
}
