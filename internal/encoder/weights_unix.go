//go:build unix

package encoder

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFloats maps n zeroed float32s of anonymous private memory. ok is false
// when the system refuses.
func mapFloats(n int) (f []float32, b []byte, ok bool) {
	b, err := unix.Mmap(-1, 0, 4*n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n), b, true
}

// protectMapping makes a mapping read-only.
func protectMapping(b []byte) error {
	if err := unix.Mprotect(b, unix.PROT_READ); err != nil {
		return fmt.Errorf("encoder: protect weights: %w", err)
	}
	return nil
}

// unmapMapping unmaps a mapping made by mapFloats.
func unmapMapping(b []byte) { _ = unix.Munmap(b) }
