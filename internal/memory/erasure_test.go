package memory

import (
	"context"
	"testing"
	"time"
)

func TestErasureGuard(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	if _, ok := ErasureGuard(ctx, "t", "u"); ok {
		t.Fatal("guard on a bare context")
	}
	ctx = WithErasureGuard(ctx, "t", "u", t0.Add(time.Minute))
	ctx = WithErasureGuard(ctx, "t", "u", t0)                    // earlier wins
	ctx = WithErasureGuard(ctx, "t", "u", t0.Add(time.Hour))     // later is ignored
	ctx = WithErasureGuard(ctx, "t", "v", time.Time{})           // zero is ignored
	other := WithErasureGuard(ctx, "t2", "u", t0.Add(time.Hour)) // another tenant's user
	tests := []struct {
		ctx          context.Context
		tenant, user string
		want         time.Time
		ok           bool
	}{
		{ctx, "t", "u", t0, true},
		{ctx, "t", "v", time.Time{}, false},
		{ctx, "t2", "u", time.Time{}, false},
		{other, "t2", "u", t0.Add(time.Hour), true},
		{other, "t", "u", t0, true},
	}
	for i, tt := range tests {
		if got, ok := ErasureGuard(tt.ctx, tt.tenant, tt.user); ok != tt.ok || !got.Equal(tt.want) {
			t.Errorf("%d: ErasureGuard(%s, %s) = %v, %v; want %v, %v", i, tt.tenant, tt.user, got, ok, tt.want, tt.ok)
		}
	}
}
