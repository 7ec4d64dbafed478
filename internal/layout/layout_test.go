package layout

import "testing"

// The kubelet's paths, which tools and the upstream suites read.
func TestPathsAreTheKubelets(t *testing.T) {
	r, l := Root("/var/lib/kubelet"), Logs("/var/log/pods")
	for got, want := range map[string]string{
		r.Pods():                            "/var/lib/kubelet/pods",
		r.Pod("u1"):                         "/var/lib/kubelet/pods/u1",
		r.Volumes("u1"):                     "/var/lib/kubelet/pods/u1/volumes",
		r.EmptyDir("u1", "cache"):           "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/cache",
		r.Volume("u1", PluginSecret, "s"):   "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/s",
		r.SubPath("u1", "v", "c", 2):        "/var/lib/kubelet/pods/u1/volume-subpaths/v/c/2",
		r.Container("u1", "c"):              "/var/lib/kubelet/pods/u1/containers/c",
		r.HostsFile("u1"):                   "/var/lib/kubelet/pods/u1/etc-hosts",
		l.Pod("ns", "web", "u1"):            "/var/log/pods/ns_web_u1",
		l.File("ns", "web", "u1", "app", 3): "/var/log/pods/ns_web_u1/app/3.log",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}
