package userns

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"time"
)

// PoolUser is the user whose subordinate IDs are the node's pool, the
// kubelet's: operators who set /etc/subuid for the kubelet need not
// change it for nodeagent.
const PoolUser = "kubelet"

// Pool is the node's pool of host IDs, as the kubelet's
// getKubeletMappings: the subordinate IDs getsubids gives PoolUser when
// that user exists and the tool is installed (UIDs and GIDs must agree);
// else every ID from idsPerPod up.
func Pool(ctx context.Context, idsPerPod uint32) (first, length uint32, err error) {
	def := func() (uint32, uint32, error) { return idsPerPod, uint32((1 << 32) - uint64(idsPerPod)), nil }
	if _, err := user.Lookup(PoolUser); err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return def()
		}
		return 0, 0, fmt.Errorf("user namespace pool: look up user %q: %w", PoolUser, err)
	}
	tool, err := exec.LookPath("getsubids")
	if err != nil {
		return def()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	uids, err := exec.CommandContext(ctx, tool, PoolUser).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("user namespace pool: %s %s: %w", tool, PoolUser, err)
	}
	gids, err := exec.CommandContext(ctx, tool, "-g", PoolUser).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("user namespace pool: %s -g %s: %w", tool, PoolUser, err)
	}
	if string(uids) != string(gids) {
		return 0, 0, fmt.Errorf("user namespace pool: the subordinate UIDs and GIDs of %q differ (%q, %q)", PoolUser, strings.TrimSpace(string(uids)), strings.TrimSpace(string(gids)))
	}
	return parseSubIDs(string(uids))
}

// parseSubIDs reads getsubids' one line, "0: kubelet 65536 7208960".
func parseSubIDs(out string) (first, length uint32, err error) {
	lines := strings.Split(strings.Trim(out, "\n"), "\n")
	if len(lines) != 1 {
		return 0, 0, fmt.Errorf("user namespace pool: getsubids gave %d lines, want one range: %q", len(lines), out)
	}
	f := strings.Fields(lines[0])
	if len(f) != 4 {
		return 0, 0, fmt.Errorf("user namespace pool: getsubids line %q: want \"<n>: <user> <first> <count>\"", lines[0])
	}
	a, errA := strconv.ParseUint(f[2], 10, 32)
	b, errB := strconv.ParseUint(f[3], 10, 32)
	if err := errors.Join(errA, errB); err != nil {
		return 0, 0, fmt.Errorf("user namespace pool: getsubids line %q: %w", lines[0], err)
	}
	return uint32(a), uint32(b), nil
}
