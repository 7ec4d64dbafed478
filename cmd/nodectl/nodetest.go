package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// runNodetest runs nodetest with nodectl's arguments: the one beside
// nodectl, else the one on PATH. Its exit code is nodectl's.
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
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exitCode(exit.ExitCode())
	}
	return err
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
