package postgres

import (
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
)

var _ storetest.ChatLockStore = (*Store)(nil)

// TestChatLockContract runs the chat lock suite on two Stores over one
// database, as two gateways open it.
func TestChatLockContract(t *testing.T) {
	storetest.RunChatLocks(t, func(t *testing.T) (storetest.ChatLockStore, storetest.ChatLockStore) {
		url := testenv.PostgresURL(t)
		return mustOpenURL(t, url), mustOpenURL(t, url)
	})
}

// BenchmarkChatLock measures what the chat lock adds to a full-history
// turn's save (storetest.BenchChatLock).
func BenchmarkChatLock(b *testing.B) {
	storetest.BenchChatLock(b, mustOpen(b))
}
