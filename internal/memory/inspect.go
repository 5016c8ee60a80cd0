package memory

import "time"

// UserActivity describes one user of a tenant for an operator's listing:
// what is stored about them and when they were last active.
type UserActivity struct {
	User string `json:"user"`
	// Conversations and Messages count the user's conversations and their
	// live messages.
	Conversations int `json:"conversations"`
	Messages      int `json:"messages"`
	// LastActive is the newest conversation update.
	LastActive time.Time `json:"last_active"`
}

// Branch is a run of a conversation's messages that left the live branch
// together, when the client edited or regenerated an earlier turn.
type Branch struct {
	SupersededAt time.Time `json:"superseded_at"`
	// Messages are in Seq order.
	Messages []Message `json:"messages"`
}

// Footprint counts what a store holds about one user of a tenant, table by
// table; all zero means nothing of the user is left.
type Footprint struct {
	Conversations int `json:"conversations"`
	Messages      int `json:"messages"`
	Summaries     int `json:"summaries"`
	Facts         int `json:"facts"`
	Items         int `json:"items"`
	Exchanges     int `json:"exchanges"`
	// DeadLetters counts captured exchanges the store refused for good.
	DeadLetters int `json:"dead_letters"`
}

// Empty reports whether nothing of the user is stored.
func (f Footprint) Empty() bool { return f == Footprint{} }

// SavingsBucket is the memory accounting of one tenant's chat requests in
// one time bucket: what their prompts would have cost with the full stored
// history (TokensOriginal) against what memory sent (TokensSent), and how
// many requests were forwarded without memory (Degraded).
type SavingsBucket struct {
	Tenant string    `json:"tenant"`
	Start  time.Time `json:"start"`
	// Requests counts the requests whose messages memory assembled.
	Requests       int64 `json:"requests"`
	TokensOriginal int64 `json:"tokens_original"`
	TokensSent     int64 `json:"tokens_sent"`
	Degraded       int64 `json:"degraded"`
	// TokensRepeated are the prompt tokens sent that repeat, from the first
	// byte, the previous request's prompt of the same conversation: what a
	// provider's prompt cache can serve.
	TokensRepeated int64 `json:"tokens_repeated"`
	// TokensCached are the prompt tokens the provider reported reading from
	// its prompt cache.
	TokensCached int64 `json:"tokens_cached"`
}
