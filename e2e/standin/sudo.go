package standin

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// SudoCommand is the command sudo would run: its arguments without sudo's
// own options. Running as anyone but root is refused: the stand-in only
// serves a suite that already runs as root.
func SudoCommand(args []string) ([]string, error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return nonEmpty(args[i+1:])
		case a == "-u" || a == "--user":
			if i+1 == len(args) || (args[i+1] != "root" && args[i+1] != "#0") {
				return nil, fmt.Errorf("sudo stand-in: runs commands as root only")
			}
			i++
		case strings.HasPrefix(a, "-"):
			// -E, -n, -H, -S: no effect for root.
		default:
			return nonEmpty(args[i:])
		}
	}
	return nil, fmt.Errorf("sudo stand-in: no command")
}

func nonEmpty(args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("sudo stand-in: no command")
	}
	return args, nil
}

// Sudo runs the command in place of the process, as root already.
func Sudo(args []string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("sudo stand-in: not root")
	}
	argv, err := SudoCommand(args)
	if err != nil {
		return err
	}
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("sudo: %s: command not found", argv[0])
	}
	return syscall.Exec(bin, argv, os.Environ())
}
