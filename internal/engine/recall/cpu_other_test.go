//go:build !unix

package recall

import "time"

// cpuNow is 0 where the process's CPU time is not read.
func cpuNow() time.Duration { return 0 }
