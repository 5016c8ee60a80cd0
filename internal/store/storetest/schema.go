package storetest

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// NewestMigration returns the version of the last migration in fsys, the
// newest schema a build holding fsys knows.
func NewestMigration(t testing.TB, fsys fs.FS) int {
	t.Helper()
	ms, err := contract.Migrations(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Version
}

// CheckSchemaTooNew fails t unless err is an Open's refusal of a database
// recording migration known+1, from a build that knows up to known: a
// memory.ErrSchemaTooNew, a contract.SchemaTooNewError naming both
// versions, and a message that names them and says to upgrade.
func CheckSchemaTooNew(t testing.TB, err error, known int) {
	t.Helper()
	if !errors.Is(err, memory.ErrSchemaTooNew) {
		t.Fatalf("Open on a newer schema = %v, want memory.ErrSchemaTooNew", err)
	}
	var e *contract.SchemaTooNewError
	if !errors.As(err, &e) || e.Version != known+1 || e.Known != known {
		t.Fatalf("Open = %v, want a SchemaTooNewError at %d, known %d", err, known+1, known)
	}
	for _, want := range []string{fmt.Sprintf("%04d", known+1), fmt.Sprintf("%04d", known), "upgrade"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
