/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// minorVersion is a Kubernetes major.minor as the EKS AMI parameters name it ("1.37").
var minorVersion = regexp.MustCompile(`^[1-9][0-9]*\.[0-9]+$`)

// kubernetesVersion follows the API server's minor version, which picks the EKS-optimized AMIs new nodes launch
// with: read at start and every interval after. A failed read keeps the version read before (and says so:
// condition, log, stevedore_cloudprovider_kubernetes_version_read_failures_total); before a first good read
// there is no version, and no AMI alias resolves.
type kubernetesVersion struct {
	read  func(context.Context) (string, error)
	clock clock.PassiveClock

	mu       sync.RWMutex
	current  string
	readAt   time.Time
	failure  error
	failedAt time.Time
}

// errVersionUnknown is the error of get before a first good read.
var errVersionUnknown = errors.New("the API server's Kubernetes version has not been read yet")

// get returns the version in use.
func (k *kubernetesVersion) get() (string, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.current == "" {
		if k.failure != nil {
			return "", fmt.Errorf("%w: %w", errVersionUnknown, k.failure)
		}
		return "", errVersionUnknown
	}
	return k.current, nil
}

// refresh reads the version once and reports whether it changed.
func (k *kubernetesVersion) refresh(ctx context.Context) (bool, error) {
	v, err := k.read(ctx)
	if err == nil && !minorVersion.MatchString(v) {
		err = fmt.Errorf("the API server reports version %q, not major.minor", v)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.clock.Now()
	if err != nil {
		if ctx.Err() == nil {
			k.failure, k.failedAt = err, now
			metrics.KubernetesVersionReadFailures.Inc()
		}
		return false, err
	}
	changed := k.current != "" && k.current != v
	k.current, k.readAt, k.failure = v, now, nil
	return changed, nil
}

// run reads the version every interval until ctx ends (a failed read is tried again sooner, backing off), and
// calls onChange after a read that found another version.
func (k *kubernetesVersion) run(ctx context.Context, interval time.Duration, onChange func(old, cur string)) {
	logger := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: 5 * time.Second, Factor: 2, Steps: 8, Cap: interval}
	for {
		next := interval
		old, _ := k.get()
		changed, err := k.refresh(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			next = backoff.Step()
			if old != "" {
				logger.Error(err, "Reading the API server's Kubernetes version failed; new nodes keep the AMIs of the version read before",
					"version", old, "retryIn", next)
			} else {
				logger.Error(err, "Reading the API server's Kubernetes version failed; no EKS-optimized AMI resolves until it is read",
					"retryIn", next)
			}
		case changed:
			cur, _ := k.get()
			logger.Info("The API server's Kubernetes version changed: new nodes launch with its AMIs, nodes with the old ones drift",
				"from", old, "to", cur)
			onChange(old, cur)
			backoff = wait.Backoff{Duration: 5 * time.Second, Factor: 2, Steps: 8, Cap: interval}
		default:
			backoff = wait.Backoff{Duration: 5 * time.Second, Factor: 2, Steps: 8, Cap: interval}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// condition says which version the AMIs are resolved for and whether the last read succeeded, in the shape of
// the EC2NodeClass condition KubernetesVersionReady: false with RefreshFailed (the version read before kept) or
// Unknown (none read yet). The message changes only when the situation does.
func (k *kubernetesVersion) condition() (ok bool, reason, message string) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	switch {
	case k.current == "" && k.failure == nil:
		return false, "NotRead", "the API server's Kubernetes version has not been read yet"
	case k.current == "":
		return false, "ReadFailed", fmt.Sprintf("reading the API server's Kubernetes version failed (%s); no EKS-optimized AMI resolves "+
			"until it is read", StableMessage(k.failure))
	case k.failure != nil:
		return false, "RefreshFailed", fmt.Sprintf("reading the API server's Kubernetes version failed (%s); new nodes keep the AMIs "+
			"of Kubernetes %s, read at %s", StableMessage(k.failure), k.current, k.readAt.UTC().Format(time.RFC3339))
	default:
		return true, "Read", fmt.Sprintf("AMIs are those of Kubernetes %s, the API server's version", k.current)
	}
}
