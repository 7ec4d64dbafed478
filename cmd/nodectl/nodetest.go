package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// runNodetest replaces nodectl with nodetest, the one beside nodectl or
// else the one on PATH, run with nodectl's arguments: signals (Ctrl-C)
// and the exit code are nodetest's own.
func runNodetest(verb string, args []string) error {
	bin := ""
	if self, err := os.Executable(); err == nil {
		if candidate := filepath.Join(filepath.Dir(self), "nodetest"); isFile(candidate) {
			bin = candidate
		}
	}
	if bin == "" {
		path, err := exec.LookPath("nodetest")
		if err != nil {
			return fmt.Errorf("nodectl %s runs nodetest, which is neither beside nodectl nor on PATH (make build puts it in bin/, make install beside nodectl)", verb)
		}
		bin = path
	}
	err := syscall.Exec(bin, append([]string{bin}, args...), os.Environ())
	return fmt.Errorf("run %s: %w", bin, err)
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
