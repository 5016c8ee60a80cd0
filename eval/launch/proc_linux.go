package launch

import (
	"os/exec"
	"syscall"
)

// bindToParent makes the kernel stop the gateway when this process dies
// without stopping it (a crash, a broken pipe), so no gateway is left behind.
func bindToParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
