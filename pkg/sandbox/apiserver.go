/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"

	"github.com/stevedore-dev/stevedore/pkg/componentglobals"
)

// apiServer is a kube-apiserver running in this process.
type apiServer struct {
	port    int
	stopped chan error
	cancel  context.CancelFunc
}

// serviceCIDR is the sandbox cluster's Service range; etcdPrefix is where every API server of the sandbox keeps its
// objects in etcd (the same for all, so that an upgraded control plane finds the cluster as it was).
const (
	serviceCIDR = "10.96.0.0/16"
	etcdPrefix  = "/registry"
)

// apiServerArgs are the kube-apiserver flags every API server of the sandbox runs with, of whichever minor: RBAC
// authorization, the sandbox's certificates, service account tokens signed with its key.
func apiServerArgs(certs *pki) []string {
	return []string{
		"--authorization-mode=Node,RBAC",
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + certs.ServiceAccountKeyFile,
		"--service-account-signing-key-file=" + certs.ServiceAccountKeyFile,
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--client-ca-file=" + certs.CAFile,
		"--token-auth-file=" + certs.TokenFile,
		"--tls-cert-file=" + certs.ServingCertFile,
		"--tls-private-key-file=" + certs.ServingKeyFile,
		// the sandbox's clients are its own: priority and fairness would only add its bookkeeping to every request
		// (an eighth of the API server's CPU in a scale-out of a thousand pods)
		"--enable-priority-and-fairness=false",
	}
}

// startAPIServer runs kube-apiserver in this process against etcdURL, with the sandbox's certificates, RBAC
// authorization and the default admission plugins, serving on a loopback port (a free one when port is 0), with
// extra flags.
func startAPIServer(ctx context.Context, etcdURL string, certs *pki, port int, extra []string) (*apiServer, error) {
	ctx, cancel := context.WithCancel(ctx)
	srv, err := runAPIServer(ctx, etcdURL, certs, port, extra)
	if err != nil {
		cancel()
		return nil, err
	}
	srv.cancel = cancel
	return srv, nil
}

func runAPIServer(ctx context.Context, etcdURL string, certs *pki, port int, extra []string) (*apiServer, error) {
	registry, _, err := componentglobals.New()
	if err != nil {
		return nil, err
	}

	s := apiserveroptions.NewServerRunOptions()
	s.GenericServerRunOptions.ComponentGlobalsRegistry = registry
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(append(apiServerArgs(certs), extra...)); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	listener, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver listener: %w", err)
	}
	s.SecureServing.Listener = listener
	s.SecureServing.BindPort = listener.Addr().(*net.TCPAddr).Port
	s.SecureServing.ExternalAddress = net.ParseIP("127.0.0.1")
	s.SecureServing.ServerCert.CertDirectory = filepath.Dir(certs.CAFile)
	s.Etcd.StorageConfig = *storagebackend.NewDefaultConfig(etcdPrefix, nil)
	s.Etcd.StorageConfig.Transport.ServerList = []string{etcdURL}
	if err := registry.Set(); err != nil {
		return nil, err
	}

	completed, err := s.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return nil, fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs))
	}
	config, err := apiserverapp.NewConfig(completed)
	if err != nil {
		return nil, err
	}
	if info := unlinkedVersion(registry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent)); info != nil {
		serveVersion(&config.Aggregator.GenericConfig.Config, info) // the aggregator serves every request first
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return nil, err
	}
	server, err := apiserverapp.CreateServerChain(completedConfig)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	stopped := make(chan error, 1)
	go func() {
		defer close(stopped)
		prepared, err := server.PrepareRun()
		if err != nil {
			stopped <- err
			return
		}
		if err := prepared.Run(ctx); err != nil {
			stopped <- err
		}
	}()

	port = listener.Addr().(*net.TCPAddr).Port
	if err := waitForAPIServer(ctx, certs.adminConfig(apiServerURL(port)), stopped); err != nil {
		return nil, err
	}
	return &apiServer{port: port, stopped: stopped}, nil
}

// apiServerURL is the address of the sandbox's API server on a loopback port.
func apiServerURL(port int) string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// waitForAPIServer waits until /readyz answers ok and the default namespace exists.
func waitForAPIServer(ctx context.Context, cfg *rest.Config, stopped <-chan error) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-stopped:
			return false, fmt.Errorf("kube-apiserver stopped while starting: %w", err)
		default:
		}
		status := 0
		client.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		if status != 200 {
			return false, nil
		}
		_, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
}

// stop stops the API server and waits for it.
func (a *apiServer) stop() {
	a.cancel()
	for range a.stopped {
	}
}
