/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"sort"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
)

// instanceTypesTTL is how long a NodePool's instance types are reused before the cloud is asked again; a failure to
// list them, or an empty list, is reused for failedTypesTTL only: the cloud keeps its own pace of retries (a failed
// catalog read is tried again within seconds), and a solve should not wait a minute more for it.
const (
	instanceTypesTTL = time.Minute
	failedTypesTTL   = time.Second
)

// instanceTypes caches each NodePool's instance types, as the cloud offers them, for instanceTypesTTL or until the
// NodePool changes or the cloud marks offerings unavailable.
type instanceTypes struct {
	cloud     cloud.Provider
	nodePools listers.NodePoolLister
	clock     clock.Clock

	mu     sync.Mutex
	byPool map[string]cachedTypes
	// merged is known's answer, kept until byPool changes (nil: to be made): each launch and registration asks.
	merged map[string]*cloud.InstanceType
}

// cachedTypes is one NodePool's instance types (or the error listing them), at a NodePool generation.
type cachedTypes struct {
	at    time.Time
	gen   int64
	types []*cloud.InstanceType
	err   error
}

func newInstanceTypes(cl cloud.Provider, nodePools listers.NodePoolLister, clk clock.Clock) *instanceTypes {
	return &instanceTypes{cloud: cl, nodePools: nodePools, clock: clk, byPool: map[string]cachedTypes{}}
}

// InstanceTypes returns a NodePool's instance types, cached for a minute.
func (c *instanceTypes) InstanceTypes(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, error) {
	c.mu.Lock()
	cached, ok := c.byPool[np.Name]
	c.mu.Unlock()
	ttl := instanceTypesTTL
	if cached.err != nil || len(cached.types) == 0 {
		ttl = failedTypesTTL
	}
	if ok && cached.gen == np.Generation && c.clock.Since(cached.at) < ttl {
		return cached.types, cached.err
	}
	its, err := c.cloud.InstanceTypes(ctx, np)
	c.mu.Lock()
	c.byPool[np.Name] = cachedTypes{at: c.clock.Now(), gen: np.Generation, types: its, err: err}
	c.merged = nil
	c.mu.Unlock()
	return its, err
}

// OfferingsChanged drops the cached instance types, so that the next solve sees offerings just marked
// unavailable (a spot interruption warning, a launch that found no capacity).
func (c *instanceTypes) OfferingsChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byPool = map[string]cachedTypes{}
	c.merged = nil
}

// InstanceTypesOf returns the known instance types by name (shared: not to be changed), with those of a NodeClaim's NodePool loaded first when
// this process has not loaded them yet (after a restart, a NodeClaim launched by the previous leader registers before
// any solve): a node's labels and its DaemonSets depend on its instance type.
func (c *instanceTypes) InstanceTypesOf(ctx context.Context, claim *stevedorev1.NodeClaim) map[string]*cloud.InstanceType {
	its := c.known()
	name := claim.Status.InstanceType
	if name == "" || its[name] != nil {
		return its
	}
	np, err := c.nodePools.Get(claim.Labels[stevedorev1.LabelNodePool])
	if err != nil {
		return its
	}
	if _, err := c.InstanceTypes(ctx, np); err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot load the NodePool's instance types", "nodepool", np.Name, "err", err)
		return its
	}
	return c.known()
}

// known returns every instance type the NodePools' caches hold, by name; a type two NodePools list is taken from
// the first NodePool by name. The map is shared until the caches change: not to be changed.
func (c *instanceTypes) known() map[string]*cloud.InstanceType {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.merged != nil {
		return c.merged
	}
	pools := make([]string, 0, len(c.byPool))
	for name := range c.byPool {
		pools = append(pools, name)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(pools)))
	out := map[string]*cloud.InstanceType{}
	for _, pool := range pools { // last by name first, so that the first NodePool's type is written last
		for _, it := range c.byPool[pool].types {
			out[it.Name] = it
		}
	}
	c.merged = out
	return out
}
