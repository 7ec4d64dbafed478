package experiment

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"nodeagent/e2e/launch"
)

// Agents are what an experiment can run against.
var Agents = []string{"nodeagent", "kubelet", "earlyoom"}

// Applies says why scenario s cannot run against agent, or nil: a
// scenario asks for what only some agents have.
func Applies(s *Scenario, agent string) error {
	switch agent {
	case "", "nodeagent":
		return nil
	case "kubelet":
		if s.Agent.EvictionRanking == "qos" {
			return errors.New("evictionRanking qos is nodeagent's; the kubelet ranks only its own way")
		}
		return nil
	case "earlyoom":
		if s.NeedsAPIServer() {
			return errors.New("resize steps need pods in the API server; earlyoom's pods are static")
		}
		if s.Agent.EvictionRanking == "qos" {
			return errors.New("evictionRanking qos is nodeagent's; earlyoom kills the largest oom_score")
		}
		if len(s.Agent.EvictionSoft) > 0 {
			return errors.New("earlyoom has no soft thresholds (evictionSoft)")
		}
		_, err := hardMemoryMargin(s)
		return err
	}
	return fmt.Errorf("unknown agent %q: one of %v", agent, Agents)
}

// startPeer starts env.Agent for one run in dir.
func startPeer(ctx context.Context, s *Scenario, env Env, cp *launch.ControlPlane, dir string, nodeMemory int64) (peer, error) {
	switch env.Agent {
	case "kubelet":
		return startKubelet(ctx, env, cp, filepath.Join(dir, "kubelet"), s.Settings(nodeMemory))
	case "earlyoom":
		return startEarlyoom(ctx, s, env, dir, nodeMemory)
	}
	if cp != nil { // resize steps: the pods are the API server's
		return startAPIAgent(ctx, env, cp, filepath.Join(dir, "agent"), s.Settings(nodeMemory), "--eviction-ranking", s.Agent.EvictionRanking)
	}
	return startAgent(ctx, env, filepath.Join(dir, "agent"), s.Settings(nodeMemory), nil, "--eviction-ranking", s.Agent.EvictionRanking)
}

// agentName is how reports name env's agent.
func (env Env) agentName() string {
	if env.Agent == "" {
		return "nodeagent"
	}
	return env.Agent
}
