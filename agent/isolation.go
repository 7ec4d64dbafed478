package agent

// What keeps pods apart beyond their cgroups and namespaces: each pod's
// own range of host IDs (hostUsers: false), and images pulled with a
// pod's secret kept from pods without it.

import (
	"context"
	"fmt"

	"nodeagent/agent/images/pullrecords"
	"nodeagent/agent/userns"
	"nodeagent/internal/layout"
)

// buildUserNamespaces makes the manager of pods' ID ranges, from the pool
// of the kubelet's user, and reads back the ranges pods on disk hold.
func (a *Agent) buildUserNamespaces(ctx context.Context, p *parts) (*userns.Manager, error) {
	ids := a.cfg.IDsPerPod()
	first, length, err := userns.Pool(ctx, ids)
	if err != nil {
		return nil, err
	}
	st := p.rtStatus
	m, err := userns.New(userns.Config{Root: layout.Root(a.opts.RootDir), IDsPerPod: ids, FirstID: first, Length: length,
		MaxPods: int(a.cfg.MaxPods), Supports: func(handler string) (bool, error) { return handlerSupportsUserNamespaces(st, handler) }})
	if err != nil {
		return nil, err
	}
	a.log.Info("user namespaces", "firstID", first, "length", length, "idsPerPod", ids, "inUse", m.InUse(),
		"runtimeSupport", defaultHandler(st).GetFeatures().GetUserNamespaces())
	return m, nil
}

// buildPullRecords opens the records of which credentials pulled each
// image (imagePullCredentialsVerificationPolicy), taking up pulls an
// earlier agent left under way.
func (a *Agent) buildPullRecords(ctx context.Context, p *parts) error {
	imgs, err := p.rt.ListImages(ctx)
	if err != nil {
		return fmt.Errorf("list images for the image pull records: %w", err)
	}
	p.pulled, err = pullrecords.Open(layout.Root(a.opts.RootDir), string(a.cfg.ImagePullCredentialsVerificationPolicy),
		a.cfg.PreloadedImagesVerificationAllowlist, imgs, a.opts.Clock.Now, a.log.With("component", "pull-records"))
	return err
}
