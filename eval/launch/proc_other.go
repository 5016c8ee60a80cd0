//go:build !linux

package launch

import "os/exec"

// bindToParent does nothing outside Linux: a gateway outlives a crashed
// caller there and must be stopped by hand.
func bindToParent(cmd *exec.Cmd) {}
