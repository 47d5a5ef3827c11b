/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"maps"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// commandQueue holds the commands under way and finishes, in the background, those waiting for their
// replacements, so that the disruption loop goes on evaluating while replacements come up. The nodes of a command
// under way are tainted, so every pass counts them as disrupting (budgets include them) and no later command takes
// them; the queue knows them, so a pass can tell a node left tainted by a command that is gone (a restart while it
// waited) from one still under way.
type commandQueue struct {
	mu sync.Mutex
	// held counts, by node name, the commands under way that hold the node.
	held map[string]int
	// pinned names, by pod UID, the node a command under way planned for a pod it moves (pin), until it is done.
	pinned map[types.UID]string
	wg     sync.WaitGroup
}

func newCommandQueue() *commandQueue {
	return &commandQueue{held: map[string]int{}, pinned: map[types.UID]string{}}
}

// pin records the nodes a command under way planned for the pods it moves, by pod UID, until release.
func (q *commandQueue) pin(targets map[types.UID]string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	maps.Copy(q.pinned, targets)
}

// pins returns a copy of the nodes the commands under way planned for the pods they move, by pod UID.
func (q *commandQueue) pins() map[types.UID]string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return maps.Clone(q.pinned)
}

// hold records a command's nodes as under way.
func (q *commandQueue) hold(cmd *Command) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, cand := range cmd.Candidates {
		q.held[cand.Node.Name]++
	}
}

// release forgets a command's nodes once it is done.
func (q *commandQueue) release(cmd *Command) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, cand := range cmd.Candidates {
		for _, pod := range cand.Pods {
			delete(q.pinned, pod.UID)
		}
		if q.held[cand.Node.Name]--; q.held[cand.Node.Name] <= 0 {
			delete(q.held, cand.Node.Name)
		}
	}
}

// holds reports whether a command under way holds the node.
func (q *commandQueue) holds(node string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held[node] > 0
}

// nodes lists the nodes of the commands under way, by name.
func (q *commandQueue) nodes() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.held))
	for name := range q.held {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// finishLater runs finish in the background; a failure is logged (the command has recorded its events and
// metrics).
func (q *commandQueue) finishLater(ctx context.Context, cmd *Command, finish func(context.Context) error) {
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		if err := finish(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Disruption command failed", "method", cmd.Method, "nodes", cmd.String())
		}
	}()
}

// wait returns once every command finishing in the background is done.
func (q *commandQueue) wait() { q.wg.Wait() }

// clearStaleMarks untaints the nodes a command marked for disruption and left behind: the process that ran it
// stopped while it waited for replacements (a restart, a lost leadership), so its NodeClaim is not being deleted
// and no command of this process holds it. Their replacements stay; an empty one is consolidated as any empty
// node. (Surges it left under way are scaled back by every pass.) It runs when the controller starts.
func (c *Controller) clearStaleMarks(ctx context.Context) {
	claims, err := c.opts.NodeClaims.List(labels.Everything())
	if err != nil {
		return
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	for _, claim := range claims {
		if claim.DeletionTimestamp != nil || claim.Status.NodeName == "" {
			continue
		}
		node, err := c.opts.Nodes.Get(claim.Status.NodeName)
		if err != nil || node.DeletionTimestamp != nil || !stevedorev1.IsDisrupted(node) || c.queue.holds(node.Name) {
			continue
		}
		if err := c.unmarkDisrupting(ctx, &Candidate{Node: node, NodeClaim: claim}); err != nil {
			klog.FromContext(ctx).Error(err, "Clearing the disruption mark a stopped command left failed", "node", node.Name)
			continue
		}
		klog.FromContext(ctx).Info("Cleared the disruption mark a stopped command left on the node", "node", node.Name,
			"nodeclaim", claim.Name, "reason", claim.Status.DisruptionReason)
		c.w.event(&Candidate{Node: node, NodeClaim: claim}, corev1.EventTypeNormal, ReasonDisruptionFailed,
			"the disruption command that marked the node stopped before it finished; the node stays")
	}
}
