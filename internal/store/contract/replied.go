package contract

import "github.com/memgate/memgate/internal/memory"

// RepliedHolders bounds how many conversations a lookup of a reply by its
// print returns (the most recently updated): a reply that opens many chats
// alike (a greeting) is held by many, and the lookup's caller wants the
// one a client's window continues, which is almost always among the
// newest.
const RepliedHolders = 8

// ReplyArg returns the reply column's value of m: the Sum of its print
// (memory.Message.Print) when m is an assistant's message with text, else
// nil (NULL). A store writes it with every message it inserts, and looks
// a reply up by it (memory.Replied).
func ReplyArg(m memory.Message) []byte {
	if m.Role != "assistant" || m.Content == "" {
		return nil
	}
	p := m.Print()
	return p.Sum[:]
}
