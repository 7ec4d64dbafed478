package criconfig

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// hostsFile has the Host write the pod's managed hosts file (a host-network
// pod's starts from the node's /etc/hosts) and returns its path.
func (b *Builder) hostsFile(pod *corev1.Pod, podIP string) (string, error) {
	var hostHosts []byte
	if pod.Spec.HostNetwork {
		var err error
		if hostHosts, err = os.ReadFile("/etc/hosts"); err != nil {
			return "", err
		}
	}
	return b.host.HostsFile(pod, hostsFileContent(pod, podIP, podDomain(pod, b.opts.ClusterDomain), string(hostHosts)))
}

// hostsFileContent is the kubelet's managed /etc/hosts: the standard
// entries and the pod's own name, or for host-network pods the host's
// file, then the pod's hostAliases.
func hostsFileContent(pod *corev1.Pod, podIP, domain, hostHosts string) []byte {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		b.WriteString("# Kubernetes-managed hosts file (host network).\n")
		b.WriteString(hostHosts)
		if hostHosts != "" && !strings.HasSuffix(hostHosts, "\n") {
			b.WriteByte('\n')
		}
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		switch h := podHostname(pod); {
		case podIP == "":
		case domain != "":
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", podIP, h, domain, h)
		default:
			fmt.Fprintf(&b, "%s\t%s\n", podIP, h)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes()
}

// mountsEtcHosts: every container gets the managed file unless it mounts
// something at /etc/hosts itself.
func mountsEtcHosts(c *corev1.Container) bool {
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == "/etc/hosts" {
			return false
		}
	}
	return true
}
