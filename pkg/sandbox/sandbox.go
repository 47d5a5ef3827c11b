/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package sandbox runs a real local Kubernetes cluster in one process for the demo and the tests: embedded etcd,
// kube-apiserver, the kube-controller-manager controllers, kwok's simulated kubelets, bootstrap nodes standing in
// for an EKS managed node group, a simulated AWS (package awsemu) and, by default, the Stevedore scheduler
// configured as in production. It never talks to real AWS. The API server and controllers are those of the
// Kubernetes Stevedore is built on, in this process, or another minor's binaries run as processes (KubeBinaries),
// and a running sandbox's control plane can be upgraded to another minor.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/stevedore-dev/stevedore/config"
	pluginconfig "github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/client"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/pkg/schedulerapp"
)

// Options configure a sandbox.
type Options struct {
	// Dir holds the sandbox's files (etcd data, certificates, kubeconfig); default a new temporary directory,
	// removed on Stop.
	Dir string
	// KubeconfigOut, if set, is where an admin kubeconfig is written.
	KubeconfigOut string
	// EnvOut, if set, is where shell export lines for the AWS endpoints and Stevedore settings are written.
	EnvOut string
	// WithScheduler runs the Stevedore scheduler inside the sandbox, with its CRDs and admission policy (or
	// webhook). Without it the sandbox is a plain cluster that never saw Stevedore, to install it into. A default
	// scheduler (the one EKS runs in its control plane) always runs.
	WithScheduler bool
	// SchedulerArgs are extra command-line arguments for the in-process scheduler.
	SchedulerArgs []string
	// LaunchDelay is how long an emulated instance takes from launch to Node registration.
	LaunchDelay time.Duration
	// SpotNotice is how long after a spot interruption warning the emulator terminates the instance; default
	// AWS's two minutes. The scheduler is told the same (plugin argument spotInterruptionNotice).
	SpotNotice time.Duration
	// ClusterName of the simulated EKS cluster; default "my-cluster", the name manifests/examples use.
	ClusterName string
	// Region of the simulated AWS; default us-east-1.
	Region string
	// BootstrapNodes is the number of CriticalAddonsOnly-tainted nodes standing in for the seeds' bootstrap node
	// group; default 2.
	BootstrapNodes int
	// NoBootstrapNodes starts the cluster with no node at all.
	NoBootstrapNodes bool
	// Catalog seeds the emulated EC2 (instance types, zones, prices); default the embedded catalog.
	Catalog *catalog.File
	// PluginArgs override arguments of the Provisioner plugin in the production configuration (tests shorten
	// the disruption loop's delays, or turn it off).
	PluginArgs map[string]any
	// KubeBinaries is a folder holding kube-apiserver and kube-controller-manager of another Kubernetes minor
	// (bin/kube/<minor>, `make kube-binaries`), run as processes; empty runs those Stevedore is built on, in this
	// process.
	KubeBinaries string
	// APIServerArgs are extra kube-apiserver flags (feature gates, runtime-config).
	APIServerArgs []string
	// NodeLeaseDuration is the Lease duration of the simulated kubelets, which renew it every quarter of that;
	// kube-controller-manager marks a node unreachable after half of it without a renewal. Default 40s (a node
	// whose simulated kubelet stops is unreachable after 20 s). A benchmark of thousands of nodes sets hours: a
	// real cluster's heartbeats load its own control plane, not the two cores the scheduler shares with this one.
	NodeLeaseDuration time.Duration
}

// DefaultNodeLeaseDuration is Options.NodeLeaseDuration's default.
const DefaultNodeLeaseDuration = 40 * time.Second

func (o Options) withDefaults() Options {
	if o.ClusterName == "" {
		o.ClusterName = "my-cluster"
	}
	if o.Region == "" && o.Catalog != nil {
		o.Region = o.Catalog.Region
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.BootstrapNodes == 0 {
		o.BootstrapNodes = 2
	}
	if o.NoBootstrapNodes {
		o.BootstrapNodes = 0
	}
	if o.NodeLeaseDuration <= 0 {
		o.NodeLeaseDuration = DefaultNodeLeaseDuration
	}
	return o
}

// Sandbox is a running local cluster.
type Sandbox struct {
	opts       Options
	dir        string
	ownDir     bool
	kubeconfig string
	// StartupTime is how long Start took.
	StartupTime time.Duration

	// RESTConfig is an admin (system:masters) client configuration.
	RESTConfig *rest.Config
	// Kube and Stevedore are admin clients.
	Kube      kubernetes.Interface
	Stevedore versioned.Interface

	env map[string]string

	cancel context.CancelFunc
	etcd   *embed.Etcd
	certs  *pki
	// the control plane: an API server on apiPort and the controller manager, in this process (binaries "") or
	// run from the binaries of another minor
	binaries  string
	apiPort   int
	apiserver stopper
	kcm       stopper
	// admission is AdmissionPolicy or AdmissionWebhook; webhookPort is where the in-process scheduler serves the
	// webhook in the latter mode
	admission   string
	webhookPort int

	schedMu   sync.Mutex
	scheduler *schedulerapp.Instance

	// AWS is the emulated AWS the scheduler talks to.
	AWS *awsemu.Emulator
	// InterruptionQueueURL is the emulated SQS queue EventBridge would feed.
	InterruptionQueueURL string
	nodes                *nodeRegistrar
}

// Start brings a sandbox up and returns once every component is ready.
func Start(ctx context.Context, opts Options) (_ *Sandbox, err error) {
	begin := time.Now()
	opts = opts.withDefaults()
	s := &Sandbox{opts: opts, dir: opts.Dir}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "stevedore-sandbox"); err != nil {
			return nil, err
		}
		s.ownDir = true
	} else if err = os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox directory: %w", err)
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	logger := klog.FromContext(ctx)

	if err := s.startKubernetes(ctx); err != nil {
		return nil, err
	}
	if err := s.startAWS(ctx); err != nil {
		return nil, fmt.Errorf("AWS emulator: %w", err)
	}
	url := s.AWS.URL()
	// Every AWS endpoint points at the emulator, the catch-all too, so that no SDK client can reach real AWS.
	s.env = map[string]string{ //nolint:gosec // G101: the local AWS emulator's fake credentials, for it alone
		"AWS_REGION":                      s.AWS.Region(),
		"AWS_ACCESS_KEY_ID":               "sandbox",
		"AWS_SECRET_ACCESS_KEY":           "sandbox-dummy-secret-key",
		"AWS_EC2_METADATA_DISABLED":       "true",
		"AWS_ENDPOINT_URL":                url,
		"AWS_ENDPOINT_URL_EC2":            url,
		"AWS_ENDPOINT_URL_SQS":            url,
		"AWS_ENDPOINT_URL_SSM":            url,
		"AWS_ENDPOINT_URL_IAM":            url,
		"AWS_ENDPOINT_URL_PRICING":        url,
		pluginconfig.EnvClusterName:       opts.ClusterName,
		pluginconfig.EnvClusterEndpoint:   s.RESTConfig.Host,
		pluginconfig.EnvInterruptionQueue: s.InterruptionQueueURL,
	}
	if err := s.StartScheduler(ctx); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if err := s.writeOutputs(); err != nil {
		return nil, err
	}
	s.StartupTime = time.Since(begin)
	logger.Info("Sandbox ready", "apiserver", s.RESTConfig.Host, "startup", s.StartupTime)
	return s, nil
}

// stopper is a running control-plane component.
type stopper interface{ stop() }

// startKubernetes starts etcd, the API server (with Stevedore's CRDs), the controller manager and kwok, and
// creates the bootstrap nodes.
func (s *Sandbox) startKubernetes(ctx context.Context) error {
	var err error
	if s.etcd, err = startEtcd(ctx, filepath.Join(s.dir, "etcd")); err != nil {
		return err
	}
	if s.certs, err = newPKI(filepath.Join(s.dir, "pki")); err != nil {
		return err
	}
	s.binaries = s.opts.KubeBinaries
	if err = s.startControlPlane(ctx); err != nil {
		return err
	}
	if s.Kube, err = kubernetes.NewForConfig(s.RESTConfig); err != nil {
		return err
	}
	if s.Stevedore, err = client.NewStevedore(s.RESTConfig); err != nil {
		return err
	}
	// Without Stevedore the sandbox is a plain cluster, as the one a user installs Stevedore into: no CRD, no
	// admission policy or webhook of Stevedore's.
	if s.opts.WithScheduler {
		if err = installCRDs(ctx, s.RESTConfig); err != nil {
			return err
		}
	}
	if err = startKwok(ctx, s.kubeconfig, s.opts.NodeLeaseDuration); err != nil {
		return fmt.Errorf("kwok: %w", err)
	}
	resync := &statusResync{kube: s.Kube, interval: 5 * time.Second, stuckAfter: 10 * time.Second, now: time.Now}
	go resync.run(ctx)
	if err = waitForControllers(ctx, s.Kube); err != nil {
		return err
	}
	// after the controllers: admitting the probe pod needs the default ServiceAccount
	if s.opts.WithScheduler {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		s.webhookPort = ports[0]
		if s.admission, err = installAdmission(ctx, s.Kube, s.webhookPort); err != nil {
			return err
		}
	}
	if err = createBootstrapNodes(ctx, s.Kube, s.opts.BootstrapNodes, s.opts.Region); err != nil {
		return err
	}
	return nil
}

// startControlPlane starts the API server (on apiPort, a free port when 0) and the controller manager of the
// sandbox's binaries, and writes the admin kubeconfig.
func (s *Sandbox) startControlPlane(ctx context.Context) error {
	etcdURL := s.etcd.Config().ListenClientUrls[0].String()
	if s.binaries == "" {
		srv, err := startAPIServer(ctx, etcdURL, s.certs, s.apiPort, s.opts.APIServerArgs)
		if err != nil {
			return fmt.Errorf("kube-apiserver: %w", err)
		}
		s.apiserver, s.apiPort = srv, srv.port
	} else {
		srv, port, err := startExternalAPIServer(ctx, s.binaries, etcdURL, s.certs, s.apiPort, s.dir, s.opts.APIServerArgs)
		if err != nil {
			return fmt.Errorf("kube-apiserver: %w", err)
		}
		s.apiserver, s.apiPort = srv, port
	}
	s.RESTConfig = s.certs.adminConfig(apiServerURL(s.apiPort))
	s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	if err := writeKubeconfig(s.kubeconfig, s.RESTConfig); err != nil {
		return err
	}
	if s.binaries == "" {
		kcm, err := startControllerManager(ctx, s.kubeconfig, s.opts.NodeLeaseDuration/2)
		if err != nil {
			return fmt.Errorf("kube-controller-manager: %w", err)
		}
		s.kcm = kcm
		return nil
	}
	kcm, err := startExternalControllerManager(s.binaries, s.kubeconfig, s.dir, s.opts.NodeLeaseDuration/2)
	if err != nil {
		return fmt.Errorf("kube-controller-manager: %w", err)
	}
	s.kcm = kcm
	return nil
}

// UpgradeControlPlane replaces the running API server and controller manager by those of binaries (a folder of
// another minor's, or "" for the ones Stevedore is built on), on the same etcd, address and certificates, as a
// managed control plane's upgrade does: clients keep their configuration. It returns once the new API server
// serves.
func (s *Sandbox) UpgradeControlPlane(ctx context.Context, binaries string) error {
	s.kcm.stop()
	s.apiserver.stop()
	s.kcm, s.apiserver = nil, nil
	s.binaries = binaries
	return s.startControlPlane(ctx)
}

// KubernetesVersion is the version the sandbox's API server reports (major "1", minor "36", git version "v1.36.3";
// the one built into this process reports no git version unless it was built with one).
func (s *Sandbox) KubernetesVersion() (*version.Info, error) {
	return s.Kube.Discovery().ServerVersion()
}

// writeOutputs writes the kubeconfig and the environment file the options ask for.
func (s *Sandbox) writeOutputs() error {
	opts := s.opts
	if opts.KubeconfigOut != "" {
		if err := writeKubeconfig(opts.KubeconfigOut, s.RESTConfig); err != nil {
			return err
		}
	}
	if opts.EnvOut != "" {
		if err := os.WriteFile(opts.EnvOut, []byte(s.EnvFile()), 0o600); err != nil {
			return fmt.Errorf("writing --env-out: %w", err)
		}
	}
	return nil
}

// Kubeconfig is the path of the sandbox's admin kubeconfig.
func (s *Sandbox) Kubeconfig() string { return s.kubeconfig }

// Env returns the environment a Stevedore scheduler needs to run against this sandbox (AWS endpoints, region,
// dummy credentials, cluster name and endpoint, interruption queue).
func (s *Sandbox) Env() map[string]string {
	out := make(map[string]string, len(s.env))
	for k, v := range s.env {
		out[k] = v
	}
	return out
}

// EnvFile renders Env as shell export lines.
func (s *Sandbox) EnvFile() string {
	keys := make([]string, 0, len(s.env))
	for k := range s.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%q\n", k, s.env[k])
	}
	return b.String()
}

// StartScheduler runs the scheduler in this process. With WithScheduler it is Stevedore with
// config/scheduler-config.yaml, as in production, plus a default-scheduler profile standing in for the EKS
// control plane's scheduler; without, it is only that default scheduler (Stevedore then runs as its own process).
// Leader election is off: an in-process scheduler cannot exit the process on losing its lease.
func (s *Sandbox) StartScheduler(ctx context.Context) error {
	s.schedMu.Lock()
	defer s.schedMu.Unlock()
	if s.scheduler != nil {
		return errors.New("the sandbox's scheduler is already running")
	}
	pluginArgs := map[string]any{}
	if s.opts.SpotNotice != 0 {
		pluginArgs["spotInterruptionNotice"] = s.opts.SpotNotice.String()
	}
	if s.admission == AdmissionWebhook {
		pluginArgs["admissionWebhook"] = map[string]any{"port": s.webhookPort, "namespace": WebhookNamespace}
	}
	for k, v := range s.opts.PluginArgs {
		pluginArgs[k] = v
	}
	raw, err := schedulerConfig(s.opts.WithScheduler, pluginArgs)
	if err != nil {
		return err
	}
	cfg := filepath.Join(s.dir, "scheduler-config.yaml")
	if err := os.WriteFile(cfg, raw, 0o600); err != nil {
		return err
	}
	args := append([]string{"--config=" + cfg, "--kubeconfig=" + s.kubeconfig, "--leader-elect=false",
		"--secure-port=0"}, s.opts.SchedulerArgs...)
	env := s.Env()
	lookup := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	inst, err := schedulerapp.Start(ctx, args, schedulerapp.Deps{Env: lookup})
	if err != nil {
		return err
	}
	s.scheduler = inst
	if s.admission == AdmissionWebhook && s.opts.WithScheduler {
		return waitForAdmission(ctx, s.Kube, "the admission webhook")
	}
	return nil
}

// AdmissionMode says how the sandbox opts namespaces in and keeps Karpenter off Stevedore's pods: AdmissionPolicy
// or AdmissionWebhook (served by the in-process scheduler).
func (s *Sandbox) AdmissionMode() string { return s.admission }

// schedulerConfig returns the in-process scheduler's configuration: Stevedore's production profile (when
// withStevedore, its Provisioner arguments overridden by pluginArgs) and a default-scheduler profile (with
// Stevedore's queue sort, which every profile must share).
func schedulerConfig(withStevedore bool, pluginArgs map[string]any) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(config.SchedulerConfig(), &doc); err != nil {
		return nil, fmt.Errorf("config/scheduler-config.yaml: %w", err)
	}
	var profiles []any
	if withStevedore {
		profiles, _ = doc["profiles"].([]any)
		for _, p := range profiles {
			prof, _ := p.(map[string]any)
			cfgs, _ := prof["pluginConfig"].([]any)
			for _, c := range cfgs {
				pc, _ := c.(map[string]any)
				if pc["name"] != "Provisioner" {
					continue
				}
				args, _ := pc["args"].(map[string]any)
				if args == nil {
					args = map[string]any{}
				}
				for k, v := range pluginArgs {
					args[k] = v
				}
				pc["args"] = args
			}
		}
	}
	defaultProfile := map[string]any{"schedulerName": corev1.DefaultSchedulerName}
	if len(profiles) > 0 {
		// the scheduler requires one queue sort in every profile: the default-scheduler profile takes Stevedore's
		if first, _ := profiles[0].(map[string]any); first != nil {
			if plugins, _ := first["plugins"].(map[string]any); plugins != nil && plugins["queueSort"] != nil {
				defaultProfile["plugins"] = map[string]any{"queueSort": plugins["queueSort"]}
			}
		}
	}
	doc["profiles"] = append(profiles, defaultProfile)
	return yaml.Marshal(doc)
}

// StopScheduler stops the in-process scheduler, if it runs.
func (s *Sandbox) StopScheduler() error {
	s.schedMu.Lock()
	defer s.schedMu.Unlock()
	if s.scheduler == nil {
		return nil
	}
	err := s.scheduler.Stop()
	s.scheduler = nil
	return err
}

// Stop stops every component and removes the sandbox's own directory.
func (s *Sandbox) Stop() {
	if err := s.StopScheduler(); err != nil {
		klog.Background().Error(err, "Stopping the sandbox's scheduler")
	}
	if s.kcm != nil {
		s.kcm.stop()
	}
	if s.cancel != nil {
		s.cancel() // kwok
	}
	if s.AWS != nil {
		s.AWS.Stop()
	}
	if s.nodes != nil {
		s.nodes.stop()
	}
	if s.apiserver != nil {
		s.apiserver.stop()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
	if s.ownDir {
		if err := os.RemoveAll(s.dir); err != nil {
			klog.Background().Error(err, "Removing the sandbox's directory", "dir", s.dir)
		}
	}
}

// Interrupt sends the interruption notice of kind (awsemu.NoticeSpot, NoticeRebalance, NoticeStop,
// NoticeScheduled) for the instance of a node to the interruption queue, as EventBridge would, and has the
// emulator act as AWS then does (a spot instance is terminated SpotNotice later). It returns the instance id.
func (s *Sandbox) Interrupt(nodeName, kind string) (string, error) {
	inst := s.AWS.EC2.InstanceByNodeName(nodeName)
	if inst == nil {
		return "", fmt.Errorf("no running instance has the node name %s", nodeName)
	}
	return inst.ID, s.AWS.Notify(s.InterruptionQueueURL, kind, inst.ID, s.opts.SpotNotice)
}
