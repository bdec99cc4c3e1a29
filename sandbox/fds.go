package sandbox

// This file keeps the sandbox's long-lived children (dockerd, listeners,
// the relay) from holding descriptors their starter inherited: run under
// `flock LOCK make demo`, a detached dockerd would otherwise keep flock's
// lock for as long as the node lives, and every other test would wait.

import (
	"os"
	"strconv"
	"syscall"
)

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own with O_CLOEXEC already; this catches inherited ones.
func closeInheritedOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
