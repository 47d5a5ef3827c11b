/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package harness runs the integration tests against a sandbox started in the test process: one control plane
// per test package, a namespace per test, and helpers that wait for conditions by polling.
package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
)

// DefaultTimeout bounds every wait: generous, since the machines are small and share their two cores between
// the whole control plane and the test.
const DefaultTimeout = 2 * time.Minute

// Run starts a sandbox with opts, runs the package's tests against it, stops it and exits. It is meant to be
// called from TestMain; the sandbox is handed to setSandbox before the tests run.
func Run(m *testing.M, opts sandbox.Options, setSandbox func(*sandbox.Sandbox)) {
	ctx := context.Background()
	sb, err := sandbox.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the sandbox: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "sandbox ready in %s\n", sb.StartupTime.Round(time.Millisecond))
	setSandbox(sb)
	code := m.Run()
	sb.Stop()
	os.Exit(code)
}

// Namespace creates a namespace named after the test and deletes it when the test ends.
func Namespace(t testing.TB, sb *sandbox.Sandbox) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + "-" + fmt.Sprint(time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := sb.Kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := sb.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// Eventually polls cond every 100ms until it returns true, failing the test with what when DefaultTimeout passes
// or cond returns an error.
func Eventually(t testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	EventuallyWithin(t, DefaultTimeout, what, cond)
}

// EventuallyWithin is Eventually with a given timeout.
func EventuallyWithin(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Context returns a context cancelled when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
