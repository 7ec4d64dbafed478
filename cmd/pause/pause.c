// pause is the sandbox ("infra") container of every pod: it holds the pod's
// namespaces open, reaps zombies (it is PID 1 of a shared PID namespace when
// one is used) and exits 0 on SIGINT or SIGTERM.
//
// It is C because a signal PID 1 has no handler for is dropped, and a Go
// program's runtime handles SIGTERM itself until main calls signal.Notify:
// a pod stopped in its first milliseconds saw the Go pause exit 2, not 0
// (the upstream CriticalPod spec caught it). Here the handlers are the
// first thing main does.
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
	(void)sig;
	_exit(0);
}

static void reap(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(void) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sigfillset(&sa.sa_mask);
	sa.sa_handler = stop;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) {
		return 1;
	}
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	if (sigaction(SIGCHLD, &sa, NULL) < 0) {
		return 1;
	}
	for (;;) {
		pause();
	}
}
