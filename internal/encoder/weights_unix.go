//go:build unix

package encoder

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// mapBytes maps n zeroed bytes of anonymous private memory. ok is false
// when the system refuses.
func mapBytes(n int) (b []byte, ok bool) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	return b, err == nil
}

// protectMapping makes a mapping read-only.
func protectMapping(b []byte) error {
	if err := unix.Mprotect(b, unix.PROT_READ); err != nil {
		return fmt.Errorf("encoder: protect weights: %w", err)
	}
	return nil
}

// unmapMapping unmaps a mapping made by mapBytes.
func unmapMapping(b []byte) { _ = unix.Munmap(b) }
