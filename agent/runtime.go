package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
)

// cgroupDriver is the runtime's cgroup driver (RuntimeConfig), as the
// kubelet takes it since 1.34; the configured cgroupDriver is the
// fallback for a runtime without the call (containerd 1.x), checked
// against what the runtime's verbose status says.
func (a *Agent) cgroupDriver(ctx context.Context, p *parts) (string, error) {
	configured := a.cfg.Driver()
	driver, err := p.rt.CgroupDriver(ctx)
	switch {
	case cri.IsUnimplemented(err):
		a.log.Info("the container runtime does not say its cgroup driver (no RuntimeConfig): using cgroupDriver from the config", "cgroupDriver", configured)
		return configured, checkDriverAgreement(configured, p.rtStatus.Info)
	case err != nil:
		return "", fmt.Errorf("ask the container runtime for its cgroup driver (RuntimeConfig): %w", err)
	case driver == "":
		return configured, nil
	case driver != configured:
		a.log.Warn("the container runtime's cgroup driver is used, not cgroupDriver from the config", "runtime", driver, "cgroupDriver", configured)
	default:
		a.log.Info("using the container runtime's cgroup driver", "cgroupDriver", driver)
	}
	return driver, nil
}

// checkDriverAgreement refuses to run when the runtime places containers
// with another cgroup driver than the agent's: pods would end up outside
// the tree the agent keeps. containerd says which in its verbose status.
func checkDriverAgreement(driver string, info map[string]string) error {
	var rc struct {
		Containerd struct {
			DefaultRuntimeName string `json:"defaultRuntimeName"`
			Runtimes           map[string]struct {
				Options map[string]any `json:"options"`
			} `json:"runtimes"`
		} `json:"containerd"`
		SystemdCgroup bool `json:"systemdCgroup"`
	}
	if err := json.Unmarshal([]byte(info["config"]), &rc); err != nil {
		return nil // a runtime that does not say: nothing to compare
	}
	systemdCgroup := rc.SystemdCgroup
	if rt, ok := rc.Containerd.Runtimes[rc.Containerd.DefaultRuntimeName]; ok {
		if v, ok := rt.Options["SystemdCgroup"].(bool); ok {
			systemdCgroup = systemdCgroup || v
		}
	}
	runtimeDriver := "cgroupfs"
	if systemdCgroup {
		runtimeDriver = "systemd"
	}
	if driver != runtimeDriver {
		return fmt.Errorf("cgroup driver mismatch: nodeagent uses %q (cgroupDriver) but the container runtime uses %q (SystemdCgroup = %v): make them agree", driver, runtimeDriver, systemdCgroup)
	}
	return nil
}

// sandboxImage is the pause image the runtime reports in its verbose
// status, so image GC never removes it.
//
// containerd 2 reports no sandbox image there: it marks it Pinned in
// ListImages instead, which image GC honours too.
func sandboxImage(info map[string]string) string {
	var rc struct {
		SandboxImage string `json:"sandboxImage"`
	}
	json.Unmarshal([]byte(info["config"]), &rc)
	return rc.SandboxImage
}

// runtimeCheckPeriod is how often the runtime's status is read.
const runtimeCheckPeriod = 2 * time.Second

// updateNodeStatus reads RuntimeReady and NetworkReady from the runtime,
// and records node events when readiness changes, in the kubelet's words.
func (a *Agent) updateNodeStatus(ctx context.Context, p *parts) {
	rt, s, rec := p.rt, p.nodeStatus, p.recorder
	var runtimeErr, networkErr string
	if st, err := rt.Status(ctx, false); err != nil {
		runtimeErr = err.Error()
	} else {
		if c := cri.Condition(st.Status, "RuntimeReady"); c == nil || !c.Status {
			runtimeErr = "RuntimeReady=false " + conditionText(c)
		}
		if c := cri.Condition(st.Status, "NetworkReady"); c == nil || !c.Status {
			networkErr = "NetworkReady=false " + conditionText(c)
		}
	}
	ready, changed := s.SetRuntime(runtimeErr, networkErr, a.opts.Clock.Now())
	if !changed {
		return
	}
	if ready {
		a.log.Info("node is ready")
		rec.Eventf(rec.NodeRef(), corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", a.opts.NodeName)
		return
	}
	why := runtimeErr
	if why == "" {
		why = networkErr
	}
	a.log.Warn("node is not ready", "reason", why)
	rec.Eventf(rec.NodeRef(), corev1.EventTypeWarning, "NodeNotReady", "Node %s status is now: NodeNotReady (%s)", a.opts.NodeName, why)
}

func conditionText(c *runtimeapi.RuntimeCondition) string {
	if c == nil {
		return "reason:unknown"
	}
	return strings.TrimSpace(fmt.Sprintf("reason:%s message:%s", c.GetReason(), c.GetMessage()))
}

// defaultHandler is the runtime's default handler ("") in its status: its
// features (recursive read-only mounts, user namespaces) are what a pod
// without a runtime class gets.
func defaultHandler(st *runtimeapi.StatusResponse) *runtimeapi.RuntimeHandler {
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() == "" {
			return h
		}
	}
	return nil
}

// nodeRuntimeHandlers are the runtime's handlers for the Node's
// status.runtimeHandlers, as the kubelet publishes them.
func nodeRuntimeHandlers(st *runtimeapi.StatusResponse) []corev1.NodeRuntimeHandler {
	var out []corev1.NodeRuntimeHandler
	for _, h := range st.GetRuntimeHandlers() {
		rro, userns := h.GetFeatures().GetRecursiveReadOnlyMounts(), h.GetFeatures().GetUserNamespaces()
		out = append(out, corev1.NodeRuntimeHandler{Name: h.GetName(),
			Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns}})
	}
	return out
}

// handlerSupportsUserNamespaces is the kubelet's
// HandlerSupportsUserNamespaces on the runtime's status: a runtime that
// lists no handlers (containerd 1.x) has none.
func handlerSupportsUserNamespaces(st *runtimeapi.StatusResponse, handler string) (bool, error) {
	hs := st.GetRuntimeHandlers()
	if len(hs) == 0 {
		return false, nil
	}
	for _, h := range hs {
		if h.GetName() == handler {
			return h.GetFeatures().GetUserNamespaces(), nil
		}
	}
	return false, fmt.Errorf("the handler %q is not known", handler)
}
