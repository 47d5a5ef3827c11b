/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
	basecompatibility "k8s.io/component-base/compatibility"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// apiServer is a kube-apiserver running in this process.
type apiServer struct {
	config  *rest.Config // loopback admin (system:masters) client config
	stopped chan error
	cancel  context.CancelFunc
}

// serviceCIDR is the sandbox cluster's Service range.
const serviceCIDR = "10.96.0.0/16"

// startAPIServer runs kube-apiserver in this process against etcdURL, with its certificates and keys in dir,
// RBAC authorization and the default admission plugins, serving on a free loopback port.
func startAPIServer(ctx context.Context, etcdURL, dir string) (*apiServer, error) {
	ctx, cancel := context.WithCancel(ctx)
	srv, err := runAPIServer(ctx, etcdURL, dir)
	if err != nil {
		cancel()
		return nil, err
	}
	srv.cancel = cancel
	return srv, nil
}

func runAPIServer(ctx context.Context, etcdURL, dir string) (*apiServer, error) {
	featureGate := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	effectiveVersion := utilcompatibility.DefaultBuildEffectiveVersion()
	effectiveVersion.SetEmulationVersion(featureGate.EmulationVersion())
	effectiveVersion.SetMinCompatibilityVersion(featureGate.MinCompatibilityVersion())
	registry := basecompatibility.NewComponentGlobalsRegistry()
	if err := registry.Register(basecompatibility.DefaultKubeComponent, effectiveVersion, featureGate); err != nil {
		return nil, err
	}

	s := apiserveroptions.NewServerRunOptions()
	s.GenericServerRunOptions.ComponentGlobalsRegistry = registry
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	keyFile, err := writeServiceAccountKey(dir)
	if err != nil {
		return nil, err
	}
	if err := fs.Parse([]string{
		"--authorization-mode=Node,RBAC",
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keyFile,
		"--service-account-signing-key-file=" + keyFile,
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
	}); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver listener: %w", err)
	}
	s.SecureServing.Listener = listener
	s.SecureServing.BindPort = listener.Addr().(*net.TCPAddr).Port
	s.SecureServing.ExternalAddress = net.ParseIP("127.0.0.1")
	s.SecureServing.ServerCert.CertDirectory = dir
	s.Etcd.StorageConfig = *storagebackend.NewDefaultConfig("/"+uuid.NewString()+"/registry", nil)
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

	loopback := rest.CopyConfig(server.GenericAPIServer.LoopbackClientConfig)
	loopback.QPS, loopback.Burst = 1000, 2000
	if err := waitForAPIServer(ctx, loopback, stopped); err != nil {
		return nil, err
	}
	return &apiServer{config: loopback, stopped: stopped}, nil
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

// writeServiceAccountKey writes a fresh ECDSA key that signs and verifies service account tokens.
func writeServiceAccountKey(dir string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	pemBytes, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "service-account.key")
	return path, os.WriteFile(path, pemBytes, 0o600)
}
