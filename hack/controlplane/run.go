package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	cmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// Cluster-wide settings a node needs to agree with; the Services' range is
// kubeadm's, so that cluster DNS is 10.96.0.10.
const (
	serviceCIDR    = "10.96.0.0/12"
	kubernetesSvc  = "10.96.0.1" // the first address of serviceCIDR
	serviceIssuer  = "https://kubernetes.default.svc.cluster.local"
	readyTimeout   = 2 * time.Minute
	componentsUser = "system:kube-"
)

// network is where the cluster's nodes and pods reach it.
type network struct {
	// advertise is the API server's address for nodes and pods; empty:
	// loopback only.
	advertise string
	// clusterCIDR is the pods' range the controller manager splits among
	// the nodes; empty: none.
	clusterCIDR string
}

// run serves the control plane from dir until SIGTERM or SIGINT.
func run(dir string, port int, signing time.Duration, nw network) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p, err := loadOrCreatePKI(filepath.Join(dir, "pki"))
	if err != nil {
		return err
	}
	server := "https://127.0.0.1:" + strconv.Itoa(port)
	if err := writeCredentials(p, dir, server, nw.advertise); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}

	etcd, etcdURL, err := startEtcd(dir)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	// The components share the process's feature gates: the controller
	// manager's flags must be made before the others add the gates'.
	runCM, err := controllerManager(p, filepath.Join(dir, "controller-manager.kubeconfig"), signing, nw.clusterCIDR)
	if err != nil {
		return fmt.Errorf("kube-controller-manager: %w", err)
	}
	runScheduler, err := scheduler(filepath.Join(dir, "scheduler.kubeconfig"))
	if err != nil {
		return fmt.Errorf("kube-scheduler: %w", err)
	}
	runAPI, err := apiServer(p, etcdURL, port, nw.advertise)
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}

	apiDone := make(chan error, 1)
	go func() { apiDone <- runAPI(ctx) }()
	admin := filepath.Join(dir, "admin.kubeconfig")
	if err := waitReady(ctx, admin, apiDone); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	client, err := adminClient(admin)
	if err != nil {
		return err
	}
	if err := ensureBootstrapRBAC(ctx, client); err != nil {
		return err
	}
	go approveServingCSRs(ctx, client)
	cmDone := make(chan error, 1)
	go func() { cmDone <- runCM(ctx) }()
	schedDone := make(chan error, 1)
	go func() { schedDone <- runScheduler(ctx) }()
	fmt.Println("KUBECONFIG=" + admin)

	select {
	case <-ctx.Done():
	case err := <-apiDone:
		return fmt.Errorf("kube-apiserver stopped: %v", err)
	case err := <-cmDone:
		return fmt.Errorf("kube-controller-manager stopped: %v", err)
	case err := <-schedDone:
		return fmt.Errorf("kube-scheduler stopped: %v", err)
	}
	// The API server drains its requests before etcd goes.
	select {
	case <-apiDone:
	case <-time.After(30 * time.Second):
	}
	return nil
}

// writeCredentials issues the serving certificate and the components'
// client certificates (fresh each run: the port may have changed), and
// their kubeconfigs.
func writeCredentials(p *pki, dir, server, advertise string) error {
	if err := p.serviceAccountKey(); err != nil {
		return err
	}
	hosts := []string{"127.0.0.1", "localhost", kubernetesSvc, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if advertise != "" {
		hosts = append(hosts, advertise)
	}
	if err := p.issue("apiserver", "kube-apiserver", nil, hosts); err != nil {
		return err
	}
	if err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil); err != nil {
		return err
	}
	clients := []struct{ name, user string }{
		{"admin", "kubernetes-admin"},
		{"controller-manager", componentsUser + "controller-manager"},
		{"scheduler", componentsUser + "scheduler"},
	}
	for _, c := range clients {
		var orgs []string
		if c.name == "admin" {
			orgs = []string{"system:masters"}
		}
		if err := p.issue(c.name, c.user, orgs, nil); err != nil {
			return err
		}
		if err := p.writeKubeconfig(filepath.Join(dir, c.name+".kubeconfig"), server, c.name, c.user); err != nil {
			return err
		}
	}
	return nil
}

// startEtcd runs a one-member etcd on loopback. Its ports are chosen once
// and kept in dir: the member's peer address is part of its data.
func startEtcd(dir string) (*embed.Etcd, string, error) {
	ports, err := etcdPorts(filepath.Join(dir, "etcd.ports"))
	if err != nil {
		return nil, "", err
	}
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[0])}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[1])}
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	// A throwaway local cluster: losing the last writes on a host crash
	// is fine, and fsync per write slows every API call on a busy disk.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Close()
		return nil, "", errors.New("not ready after a minute")
	}
	return e, client.String(), nil
}

func etcdPorts(file string) ([2]int, error) {
	var ports [2]int
	if data, err := os.ReadFile(file); err == nil {
		if _, err := fmt.Sscanf(string(data), "%d %d", &ports[0], &ports[1]); err == nil {
			return ports, nil
		}
	}
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	return ports, writeFile(file, []byte(fmt.Sprintf("%d %d\n", ports[0], ports[1])), 0o644)
}

// apiServer parses the API server's flags; the function it returns runs it.
func apiServer(p *pki, etcdURL string, port int, advertise string) (func(context.Context) error, error) {
	s := apiserveroptions.NewServerRunOptions()
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + p.path("apiserver.crt"),
		"--tls-private-key-file=" + p.path("apiserver.key"),
		"--client-ca-file=" + p.path("ca.crt"),
		"--service-account-key-file=" + p.path("sa.pub"),
		"--service-account-signing-key-file=" + p.path("sa.key"),
		"--service-account-issuer=" + serviceIssuer,
		"--service-cluster-ip-range=" + serviceCIDR,
		// The kubelet's rights, as in a kubeadm cluster.
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		// TLS bootstrap: kube-system bootstrap-token secrets authenticate.
		"--enable-bootstrap-token-auth=true",
		"--kubelet-client-certificate=" + p.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + p.path("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--profiling=false",
		"--event-ttl=1h",
	}
	if advertise != "" {
		// As kubeadm's: every address, and the lease reconciler keeps the
		// kubernetes Service's endpoint at the advertised one.
		args = append(args, "--bind-address=0.0.0.0", "--advertise-address="+advertise)
	} else {
		// Endpoints may not name loopback: the kubernetes Service exists
		// (pods get its variables) without endpoints.
		args = append(args, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none")
	}
	if err := parseInto(s.Flags(), args); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
			return err
		}
		completed, err := s.Complete(ctx)
		if err != nil {
			return err
		}
		if errs := completed.Validate(); len(errs) > 0 {
			return errors.Join(errs...)
		}
		return apiserver.Run(ctx, completed)
	}, nil
}

// controllerManager parses the controller manager's flags; the function
// it returns runs it.
func controllerManager(p *pki, kubeconfig string, signing time.Duration, clusterCIDR string) (func(context.Context) error, error) {
	s, err := cmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	all, off, aliases := controllermanager.KnownControllers(), controllermanager.ControllersDisabledByDefault(), controllermanager.ControllerAliases()
	args := append(componentArgs(kubeconfig),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+p.path("sa.key"),
		"--root-ca-file="+p.path("ca.crt"),
		"--cluster-signing-cert-file="+p.path("ca.crt"),
		"--cluster-signing-key-file="+p.path("ca.key"),
		"--cluster-signing-duration="+signing.String(),
		"--service-cluster-ip-range="+serviceCIDR,
	)
	if clusterCIDR != "" {
		// The node IPAM controller gives each node a /24 (spec.podCIDRs).
		args = append(args, "--allocate-node-cidrs=true", "--cluster-cidr="+clusterCIDR)
	}
	if err := parseInto(s.Flags(all, off, aliases), args); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if err := s.ComponentGlobalsRegistry.Set(); err != nil {
			return err
		}
		c, err := s.Config(ctx, all, off, aliases)
		if err != nil {
			return err
		}
		return controllermanager.Run(ctx, c.Complete())
	}, nil
}

// scheduler parses the scheduler's flags; the function it returns runs it.
func scheduler(kubeconfig string) (func(context.Context) error, error) {
	opts := scheduleroptions.NewOptions()
	if err := parseInto(*opts.Flags, componentArgs(kubeconfig)); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
			return err
		}
		cc, sched, err := schedulerapp.Setup(ctx, opts)
		if err != nil {
			return err
		}
		return schedulerapp.Run(ctx, cc, sched)
	}, nil
}

// componentArgs are the flags the controller manager and the scheduler
// share: their client, no serving port, no leader election (one of each).
func componentArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--leader-elect=false",
		"--profiling=false",
	}
}

// parseInto parses args into a component's named flag sets.
func parseInto(named cliflag.NamedFlagSets, args []string) error {
	fs := pflag.NewFlagSet("component", pflag.ContinueOnError)
	for _, name := range named.Order {
		fs.AddFlagSet(named.FlagSets[name])
	}
	return fs.Parse(args)
}

func adminClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// waitReady polls /readyz until the API server answers ok.
func waitReady(ctx context.Context, kubeconfig string, died <-chan error) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	deadline := time.After(readyTimeout)
	var last string
	for {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return nil
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case err := <-died:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("not ready after %s: %s", readyTimeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
