package contract

import (
	"context"
	"fmt"
	"slices"

	"github.com/memgate/memgate/internal/memory"
)

// Late is what a guarded write of a fact or summary (GuardSince set: an
// after-save hook's, which may come late) must find stored to be written
// (see CheckLate).
type Late struct {
	// Source is the message the write was made from, in the write's
	// conversation; Key "" when it names none (then it is refused).
	Source
	// moved, when not nil, is the write's conversation, set to the one
	// that holds Key now when it moved out of the default conversation.
	moved *string
}

// FactSource is what a guarded UpsertFact must find stored for f to be
// written: the message it was stated in (f.Source) live in
// f.Conversation. A message of the default conversation since moved
// elsewhere (see Adopt) moves f there. Nil when nothing is checked: an
// unguarded write (the API, admin) or one of no conversation.
func FactSource(f *memory.Fact) *Late {
	return late(memory.Identity{Tenant: f.Tenant, User: f.User, Conversation: f.Conversation}, f.Source,
		!f.GuardSince.IsZero(), &f.Conversation)
}

// SummarySource is what a guarded SaveSummary must find stored for s to
// be written: the last message it covers (s.Through) live in its
// conversation. Nil when nothing is checked: an unguarded write.
func SummarySource(s memory.Summary) *Late {
	return late(memory.Identity{Tenant: s.Tenant, User: s.User, Conversation: s.Conversation}, s.Through,
		!s.GuardSince.IsZero(), nil)
}

func late(id memory.Identity, key string, guarded bool, moved *string) *Late {
	if !guarded || id.Conversation == "" {
		return nil
	}
	return &Late{Source: Source{Identity: id, Key: key}, moved: moved}
}

// CheckLate refuses a guarded write made from what is no longer stored as
// it was read, l (nil: nothing to check): it returns an error wrapping
// memory.ErrErased unless l.Key is a live (not superseded) message of l's
// conversation (or, moved out of the default one, of the conversation it
// moved to, where a fact then goes). So a late fact or summary of a
// deleted conversation never lands in one of the same name started again,
// however its exchanges were dated (a tombstone compared with GuardSince
// would refuse a replay dated in the past). A write naming no message (l.Key
// "") is refused without asking: nothing tells which conversation of the
// name it was made from.
//
// query runs, in the write's transaction, the store's sql with l's tenant,
// user, conversation and key: a row of the conversation that holds the
// message live (l's own first; else, of the default conversation, the
// least holding it); "" when none does.
func CheckLate[R Row](ctx context.Context, query func(context.Context, string, ...any) R, sql string, l *Late) error {
	if l == nil {
		return nil
	}
	if l.Key == "" {
		return fmt.Errorf("guarded write to conversation %s names no message: %w", l.Conversation, memory.ErrErased)
	}
	var conv string
	if err := query(ctx, sql, l.Tenant, l.User, l.Conversation, l.Key).Scan(&conv); err != nil {
		return fmt.Errorf("check the source of a guarded write: %w", err)
	}
	switch {
	case conv == "" || conv != l.Conversation && l.moved == nil:
		return fmt.Errorf("message %s no longer live in conversation %s: %w", l.Key, l.Conversation, memory.ErrErased)
	case l.moved != nil:
		*l.moved = conv
	}
	return nil
}

// CheckCovers refuses a summary version whose Covers (the messages it
// summarised anew) are not all still live in its conversation: the user
// replaced one (an edit, a deletion, a regeneration, a Rewind) while it
// was written, and the save that did so dropped the versions covering it
// (SavePlan.Unsummarised). It returns an error wrapping
// memory.ErrConflict then, so compaction skips it and writes the next
// version from the live branch. Nothing is checked when s.Covers is nil.
//
// query runs, in SaveSummary's transaction (which holds its
// conversation against a concurrent save, as that save's own lock
// does), the store's sql with s's tenant, user, conversation and the
// distinct keys of s.Covers (as args returns them), returning how many of
// them are live messages of the conversation.
func CheckCovers[R Row](ctx context.Context, query func(context.Context, string, ...any) R, sql string,
	s memory.Summary, args func(keys []string) any) error {
	if s.Covers == nil {
		return nil
	}
	gone, err := notLive(ctx, query, sql, memory.Identity{Tenant: s.Tenant, User: s.User, Conversation: s.Conversation}, s.Covers, args)
	if err != nil {
		return fmt.Errorf("check the messages a summary covers: %w", err)
	}
	if gone > 0 {
		return fmt.Errorf("summary version %d of %s covers %d messages no longer live: %w",
			s.Version, s.Conversation, gone, memory.ErrConflict)
	}
	return nil
}

// CheckFactCovers refuses a guarded fact whose Covers (the messages it may
// have been stated in besides its Source) are not all live in its
// conversation: one was deleted, with its conversation, or edited away
// since the fact was extracted from it. It returns an error wrapping
// memory.ErrConflict then, so the extractor asks about the live ones on
// their own. Run before CheckLate, whose refusal (memory.ErrErased)
// would drop them all, with the same sql and args as CheckCovers (Covers
// moved out of the default conversation are not live there either: each
// asked on its own then moves with its own).
func CheckFactCovers[R Row](ctx context.Context, query func(context.Context, string, ...any) R, sql string,
	f memory.Fact, args func(keys []string) any) error {
	if len(f.Covers) == 0 || f.GuardSince.IsZero() || f.Conversation == "" {
		return nil
	}
	gone, err := notLive(ctx, query, sql, memory.Identity{Tenant: f.Tenant, User: f.User, Conversation: f.Conversation}, f.Covers, args)
	if err != nil {
		return fmt.Errorf("check the messages a fact was stated in: %w", err)
	}
	if gone > 0 {
		return fmt.Errorf("fact stated in %d messages of %s no longer live: %w", gone, f.Conversation, memory.ErrConflict)
	}
	return nil
}

// notLive counts the distinct keys that are not live messages of id's
// conversation, by sql (see CheckCovers).
func notLive[R Row](ctx context.Context, query func(context.Context, string, ...any) R, sql string,
	id memory.Identity, keys []string, args func(keys []string) any) (int, error) {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var live int
	if err := query(ctx, sql, id.Tenant, id.User, id.Conversation, args(keys)).Scan(&live); err != nil {
		return 0, err
	}
	return len(keys) - live, nil
}
