package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"

	"github.com/memgate/memgate/bench/fakeupstream"
)

// The memory-on workload. Each connection is its own user with its own
// conversation, as in a chat app with many users, and every turn says
// something different: identical turns would make every stored message
// match every full-text query, a worst case no real conversation reaches.

// vocabulary is a fixed list of pseudo-words (two syllables each) that user
// messages are drawn from, Zipf-distributed like the words of real text.
var vocabulary = func() []string {
	const consonants, vowels = "bdfgklmnprstvz", "aeiou"
	var syl []string
	for _, c := range consonants {
		for _, v := range vowels {
			syl = append(syl, string(c)+string(v))
		}
	}
	words := make([]string, 0, len(syl)*len(syl))
	for _, a := range syl {
		for _, b := range syl {
			words = append(words, a+b)
		}
	}
	// A fixed shuffle, so frequent words are not all alike.
	r := rand.New(rand.NewPCG(7, 7))
	r.Shuffle(len(words), func(i, j int) { words[i], words[j] = words[j], words[i] })
	return words
}()

// userMessage is the text of connection conn's turn seq: 8 to 24 words,
// the same for the same (conn, seq) in every run.
func userMessage(conn, seq int) string {
	r := rand.New(rand.NewPCG(uint64(conn)+1, uint64(seq)+1))
	z := rand.NewZipf(r, 1.1, 2, uint64(len(vocabulary)-1))
	n := 8 + r.IntN(17)
	words := make([]string, n)
	for i := range words {
		words[i] = vocabulary[z.Uint64()]
	}
	return strings.Join(words, " ") + "?"
}

// chatBody renders a chat request whose user message is content.
func chatBody(content string, stream bool) []byte {
	tail := ""
	if stream {
		tail = `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return fmt.Appendf(nil, `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},`+
		`{"role":"user","content":%q}],"temperature":0.2%s}`, content, tail)
}

// memoryUser is the user (and conversation) of connection conn of a
// memory-on target. The streamed and non-streamed targets of a gateway
// share them, so one prefill warms both.
func memoryUser(target string, conn int) string { return fmt.Sprintf("%s-%d", serverOf(target), conn) }

// memoryConversations is how many memory-on conversations a gateway's
// cells use: -conversations, at least one per connection of the largest
// cell.
func memoryConversations(cfg config) int { return max(slices.Max(cfg.conns), cfg.conversations) }

// memoryTurn returns the header naming the user and conversation of
// connection conn's seq-th turn in a cell of conns connections over n
// conversations: each connection cycles through its own n/conns of them,
// so no two connections share one and, with few connections, each
// conversation grows by a turn in n/conns instead of every turn.
func memoryTurn(target string, n, conns, conn, seq int) http.Header {
	per := max(n/conns, 1)
	u := memoryUser(target, conn+(seq%per)*conns)
	return http.Header{"X-Memory-User": {u}, "X-Memory-Conversation": {u}}
}

// memoryIdentity gives connection i of target its own user and
// conversation; with the prefill and earlier cells it is warm.
func memoryIdentity(target string) func(int) http.Header {
	return func(i int) http.Header { return memoryTurn(target, 1, 1, i, 0) }
}

// varyTurns gives every turn of a memory-on connection its own message.
func varyTurns(stream bool) func(conn, seq int) ([]byte, http.Header) {
	return func(conn, seq int) ([]byte, http.Header) {
		return chatBody(userMessage(conn, seq), stream), nil
	}
}

// historyBody renders turn seq of a cell's headerless full-history chats
// on connection conn, of turns turns each: the system prompt, the chat's
// earlier user messages each answered with reply (the fake upstream's), and
// its new message, so its start (the system prompt and first message)
// derives the chat's conversation. The cell's first turn begins a chat
// (nothing resent that was never sent); its messages are numbered from
// base, apart from every earlier cell's.
func historyBody(conn, base, seq, turns int, reply string, stream bool) []byte {
	start := seq - seq%turns
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."}`)
	for s := start; s < seq; s++ {
		fmt.Fprintf(&b, `,{"role":"user","content":%q},{"role":"assistant","content":%q}`, userMessage(conn, base+s), reply)
	}
	fmt.Fprintf(&b, `,{"role":"user","content":%q}],"temperature":0.2`, userMessage(conn, base+seq))
	if stream {
		b.WriteString(`,"stream":true,"stream_options":{"include_usage":true}`)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// historyTurn is the request of connection conn's turn seq of a cell
// (historyBody, from base) when the memory-on client is a headerless
// full-history one (config.historyTurns): its user named, its
// conversation not.
func historyTurn(cfg config, target string, conn, base, seq int) ([]byte, http.Header) {
	reply := fakeupstream.Reply
	if streaming(target) {
		reply = fakeupstream.StreamedReply(cfg.chunks)
	}
	return historyBody(conn, base, seq, cfg.historyTurns, reply, streaming(target)), http.Header{"X-Memory-User": {memoryUser(target, conn)}}
}

// sustainedTurns is how many turns a conversation of the sustained run
// lasts before its connection moves on to a new user.
const sustainedTurns = 40

// varySustained is varyTurns plus a new user and conversation for the
// connection every sustainedTurns turns, so a long run meets many users
// with bounded histories, as a long-running gateway does.
func varySustained(conn, seq int) ([]byte, http.Header) {
	u := fmt.Sprintf("rss-%d-%d", conn, seq/sustainedTurns)
	return chatBody(userMessage(conn, seq), false), http.Header{"X-Memory-User": {u}, "X-Memory-Conversation": {u}}
}
