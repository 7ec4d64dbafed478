// Command controlplane is a local Kubernetes control plane for nodeagent's
// API-server mode: a real kube-apiserver, kube-controller-manager and
// kube-scheduler (k8s.io/kubernetes, the version in go.mod) in one process
// on embedded etcd, bound to loopback, with generated certificates. It is a
// development and test tool, in its own Go module so that the agent's
// go.mod never requires k8s.io/kubernetes.
//
//	controlplane run --dir DIR [--port 6443] [--advertise-address IP] [--cluster-cidr CIDR]
//	                                           serve until SIGTERM
//	controlplane kubeconfig --dir DIR --node NAME --out FILE
//	                                           a node's client kubeconfig
//	controlplane bootstrap-kubeconfig --dir DIR --out FILE [--ttl 24h]
//	                                           a bootstrap token's kubeconfig
//	controlplane kubectl ARGS...               kubectl (also when run as "kubectl")
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/cli"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
)

const usage = `controlplane: a local Kubernetes control plane for nodeagent

Usage:
  controlplane run --dir DIR [--port 6443] [--advertise-address IP] [--cluster-cidr CIDR]
      Serve kube-apiserver on https://127.0.0.1:PORT with the scheduler and
      the controller manager, state and certificates in DIR. With
      --advertise-address it also listens on IP and the kubernetes Service
      has it as its endpoint; with --cluster-cidr nodes get pod ranges. Prints
      "KUBECONFIG=DIR/admin.kubeconfig" once the API server is ready.
      SIGTERM or SIGINT stop it; the next run in DIR finds the same cluster.
  controlplane kubeconfig --dir DIR --node NAME --out FILE
      Write a kubeconfig for node NAME (user system:node:NAME, group
      system:nodes), as a kubelet's, for a cluster run in DIR.
  controlplane bootstrap-kubeconfig --dir DIR --out FILE [--ttl 24h]
      Make a bootstrap token and write a kubeconfig carrying it, for a node
      that joins with TLS bootstrap (--bootstrap-kubeconfig): its client
      certificate requests are approved and signed by the controller manager.
  controlplane kubectl ARGS...
      kubectl, built from the same Kubernetes release.
`

func main() {
	if filepath.Base(os.Args[0]) == "kubectl" {
		os.Exit(runKubectl(os.Args[1:]))
	}
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCommand(os.Args[2:])
	case "kubeconfig":
		err = kubeconfigCommand(os.Args[2:])
	case "bootstrap-kubeconfig":
		err = bootstrapKubeconfigCommand(os.Args[2:])
	case "kubectl":
		os.Exit(runKubectl(os.Args[2:]))
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "controlplane: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}

func runCommand(args []string) error {
	fs := flag.NewFlagSet("controlplane run", flag.ContinueOnError)
	dir := fs.String("dir", "", "state directory (etcd data, certificates, kubeconfigs)")
	port := fs.Int("port", 6443, "API server port on 127.0.0.1")
	signing := fs.Duration("signing-duration", 365*24*time.Hour, "lifetime of the certificates the controller manager signs (short ones exercise rotation)")
	advertise := fs.String("advertise-address", "", "the address nodes and pods reach the API server at: it then listens on every address and the kubernetes Service's endpoints name it (default: loopback only, no endpoints)")
	clusterCIDR := fs.String("cluster-cidr", "", "the pods' range: each node is given a /24 of it in spec.podCIDRs (default: none given)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("run: --dir is required")
	}
	if *advertise != "" && net.ParseIP(*advertise) == nil {
		return fmt.Errorf("run: --advertise-address %q is not an IP address", *advertise)
	}
	if *clusterCIDR != "" {
		if _, _, err := net.ParseCIDR(*clusterCIDR); err != nil {
			return fmt.Errorf("run: --cluster-cidr %q: %w", *clusterCIDR, err)
		}
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	return run(abs, *port, *signing, network{advertise: *advertise, clusterCIDR: *clusterCIDR})
}

func kubeconfigCommand(args []string) error {
	fs := flag.NewFlagSet("controlplane kubeconfig", flag.ContinueOnError)
	dir := fs.String("dir", "", "the cluster's state directory")
	node := fs.String("node", "", "node name")
	out := fs.String("out", "", "kubeconfig file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *node == "" || *out == "" {
		return fmt.Errorf("kubeconfig: --dir, --node and --out are required")
	}
	admin := filepath.Join(*dir, "admin.kubeconfig")
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w (run the cluster in %s first)", err, *dir)
	}
	p, err := loadOrCreatePKI(filepath.Join(*dir, "pki"))
	if err != nil {
		return err
	}
	name := "node-" + strings.ToLower(*node)
	user := "system:node:" + *node
	if err := p.issue(name, user, []string{"system:nodes"}, nil); err != nil {
		return err
	}
	return p.writeKubeconfig(*out, cfg.Clusters["local"].Server, name, user)
}

func runKubectl(args []string) int {
	os.Args = append([]string{"kubectl"}, args...)
	cmd := kubectl.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(cmd); err != nil {
		kubectlutil.CheckErr(err)
		return 1
	}
	return 0
}
