package sqlite_test

import (
	"testing"

	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.ChatLockStore = (*sqlite.Store)(nil)

// TestChatLockContract runs the chat lock suite on two Stores over one
// file, as two processes open it.
func TestChatLockContract(t *testing.T) {
	storetest.RunChatLocks(t, func(t *testing.T) (storetest.ChatLockStore, storetest.ChatLockStore) {
		s, path := mustTempStore(t)
		return s, mustOpen(t, path)
	})
}

// BenchmarkChatLock measures what the chat lock adds to a full-history
// turn's save (storetest.BenchChatLock).
func BenchmarkChatLock(b *testing.B) {
	s, _ := mustTempStore(b)
	storetest.BenchChatLock(b, s)
}
