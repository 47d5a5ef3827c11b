/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package interruption

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/gang"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// Queue is the part of the SQS API the poller uses (*sqs.Client implements it).
type Queue interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Interrupter replaces and drains a node (the disruption controller).
type Interrupter interface {
	Interrupt(ctx context.Context, req disruption.InterruptRequest) error
}

// Unavailability records that an offering has no capacity now (the cloud provider's ICE cache).
type Unavailability interface {
	MarkUnavailable(instanceType, zone, capacityType, reason string)
}

// SpotHistory keeps the Spot interruptions per pool and NodePool (package spotrisk).
type SpotHistory interface {
	Record(nodePool, instanceType, zone string)
}

// Reasons recorded on interrupted NodeClaims (status.disruptionReason), events and metrics.
const (
	ReasonSpotInterrupted       = "SpotInterrupted"
	ReasonRebalanceRecommended  = "RebalanceRecommended"
	ReasonInstanceStateChange   = "InstanceStateChange"
	ReasonScheduledChange       = "ScheduledChange"
	ReasonCapacityBlockExpiring = "CapacityBlockExpiring"
)

// RebalanceReplace and RebalanceEvent are what a rebalance recommendation does.
const (
	RebalanceReplace = config.RebalanceReplace
	RebalanceEvent   = config.RebalanceEvent
)

// Options configure the poller.
type Options struct {
	// Args are the plugin's arguments; interruption reads, by their names: interruptionQueue (the queue's URL,
	// or its name, resolved with GetQueueUrl), rebalanceAction, spotInterruptionNotice and registrationTimeout
	// (the bound on the wait for the replacements of a node under scheduled maintenance). New defaults what is
	// unset, so the zero value is every default.
	Args        config.ProvisionerArgs
	Queue       Queue
	NodeClaims  listers.NodeClaimLister
	Interrupter Interrupter
	Offerings   Unavailability
	// History records each Spot interruption notice's pool and NodePool (nil: not recorded).
	History  SpotHistory
	Recorder events.EventRecorder
	Clock    clock.Clock
	// DrainMargin is kept between the end of the wait for replacements and the termination, for the drain.
	// Default a quarter of spotInterruptionNotice (30s of AWS's two minutes).
	DrainMargin time.Duration
	// WaitTime of a ReceiveMessage long poll. Default 20s (the SQS maximum).
	WaitTime time.Duration
	// Reservations tells when the Capacity Blocks nodes run in end (nil: Capacity Blocks are not watched).
	Reservations CapacityBlocks
	// BlockCheckInterval is how often the Capacity Blocks of nodes are checked. Default 30s.
	BlockCheckInterval time.Duration
	// Pods, Gangs and WorkloadGroups find the gangs whose pods run on an interrupted node, to report it on their
	// PodGroups (nil: not reported).
	Pods           corelisters.PodLister
	Gangs          gang.Groups
	WorkloadGroups gang.WorkloadGroups
}

// Controller polls the interruption queue.
type Controller struct {
	opts Options

	mu sync.Mutex
	// active holds the NodeClaims whose interruption is being handled, so repeated notices do nothing.
	active map[string]bool
	wg     sync.WaitGroup
}

// New returns a poller.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	opts.Args = opts.Args.Defaults(nil)
	if opts.DrainMargin == 0 {
		opts.DrainMargin = opts.Args.SpotInterruptionNotice.Duration / 4
	}
	if opts.WaitTime == 0 {
		opts.WaitTime = 20 * time.Second
	}
	if opts.BlockCheckInterval == 0 {
		opts.BlockCheckInterval = 30 * time.Second
	}
	metrics.Register()
	return &Controller{opts: opts, active: map[string]bool{}}
}

// Run resolves the queue and polls it until ctx ends. Errors (a missing queue, no permission, throttling) are
// logged and retried with backoff; they never stop the poller.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("interruption")
	ctx = klog.NewContext(ctx, logger)
	defer c.wg.Wait()
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: time.Minute}
	url := ""
	for ctx.Err() == nil {
		if url == "" {
			u, err := c.resolve(ctx)
			if err != nil {
				logger.Error(err, "Interruption queue unavailable; spot interruptions and maintenance events are not handled until it is; retrying",
					"queue", c.opts.Args.InterruptionQueue)
				c.sleep(ctx, backoff.Step())
				continue
			}
			url = u
			logger.Info("Polling the interruption queue", "queue", url)
		}
		if err := c.poll(ctx, url); err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Error(err, "Receiving from the interruption queue failed; retrying", "queue", url)
			c.sleep(ctx, backoff.Step())
			continue
		}
		backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: time.Minute}
	}
}

func (c *Controller) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-c.opts.Clock.After(d):
	}
}

// resolve returns the queue URL: the configured one, or the URL of the configured name.
func (c *Controller) resolve(ctx context.Context) (string, error) {
	q := c.opts.Args.InterruptionQueue
	if strings.HasPrefix(q, "https://") || strings.HasPrefix(q, "http://") {
		return q, nil
	}
	out, err := c.opts.Queue.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
	if err != nil {
		return "", fmt.Errorf("resolving queue %q: %w", q, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// poll receives one batch and handles its messages concurrently; each is deleted once handled.
func (c *Controller) poll(ctx context.Context, url string) error {
	// (a WaitTime beyond int32's seconds, which SQS would refuse anyway, is sent as int32's bound)
	waitSeconds := int32(max(min(c.opts.WaitTime/time.Second, math.MaxInt32), math.MinInt32))
	out, err := c.opts.Queue.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: waitSeconds,
	})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, m := range out.Messages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Handle(ctx, aws.ToString(m.Body))
			_, err := c.opts.Queue.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
			if err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "Deleting an interruption message failed; it will be received again", "messageID", aws.ToString(m.MessageId))
			}
		}()
	}
	wg.Wait()
	return nil
}

// Handle acts on one message body. What takes long (waiting for replacements) runs in the background: handling
// returns once the action has started, so the message can be deleted.
func (c *Controller) Handle(ctx context.Context, body string) {
	logger := klog.FromContext(ctx)
	msg, err := Parse(body)
	if err != nil {
		kind := "Unparseable"
		if errors.Is(err, ErrUnknownMessage) {
			kind = "Unknown"
		}
		metrics.InterruptionMessages.WithLabelValues(kind).Inc()
		logger.V(1).Info("Ignoring an interruption message", "kind", kind, "err", err)
		return
	}
	metrics.InterruptionMessages.WithLabelValues(string(msg.Kind)).Inc()
	if msg.Kind == KindNoop {
		return
	}
	claims, err := c.claimsByInstance()
	if err != nil {
		logger.Error(err, "Listing NodeClaims for an interruption message")
		return
	}
	for _, id := range msg.InstanceIDs {
		claim := claims[id]
		if claim == nil {
			metrics.InterruptionActions.WithLabelValues(string(msg.Kind), "unknown-instance").Inc()
			logger.V(1).Info("Interruption notice for an instance Stevedore does not manage", "kind", msg.Kind, "instance", id)
			continue
		}
		c.act(ctx, msg, claim)
	}
}

func (c *Controller) claimsByInstance() (map[string]*stevedorev1.NodeClaim, error) {
	list, err := c.opts.NodeClaims.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make(map[string]*stevedorev1.NodeClaim, len(list))
	for _, cl := range list {
		if cl.Status.InstanceID != "" {
			out[cl.Status.InstanceID] = cl
		}
	}
	return out, nil
}

// request is what a notice asks of disruption for one NodeClaim, and the action it counts as ("" when the notice is
// only recorded: a rebalance recommendation with rebalanceAction Event). A spot interruption also marks its
// offering unavailable.
func (c *Controller) request(msg Message, claim *stevedorev1.NodeClaim) (disruption.InterruptRequest, string) {
	now := c.opts.Clock.Now()
	req := disruption.InterruptRequest{NodeClaim: claim.Name, Forceful: true}
	action := "replace-and-drain"
	switch msg.Kind {
	case KindSpotInterruption:
		req.Reason = ReasonSpotInterrupted
		if c.opts.Offerings != nil && claim.Status.InstanceType != "" && claim.Status.Zone != "" {
			c.opts.Offerings.MarkUnavailable(claim.Status.InstanceType, claim.Status.Zone, stevedorev1.CapacityTypeSpot, "spot interruption warning")
		}
		// Wait for the replacements until the drain must start to end before the instance goes.
		start := msg.Time
		if start.IsZero() || start.After(now) {
			start = now
		}
		req.ReplacementWait = start.Add(c.opts.Args.SpotInterruptionNotice.Duration - c.opts.DrainMargin).Sub(now)
	case KindStateChange:
		// The instance is already going: drain now, replacements come up meanwhile.
		req.Reason = ReasonInstanceStateChange
		action = "drain"
	case KindScheduledChange:
		req.Reason = ReasonScheduledChange
		req.ReplacementWait = c.opts.Args.RegistrationTimeout.Duration
	case KindCapacityBlockExpiring:
		// EC2 reclaims the block's instances from 30 minutes before its end (msg.Time): replacements until then,
		// less the drain's margin
		req.Reason = ReasonCapacityBlockExpiring
		req.ReplacementWait = min(c.opts.Args.RegistrationTimeout.Duration, msg.Time.Add(-cloud.CapacityBlockReclaim-c.opts.DrainMargin).Sub(now))
	case KindRebalanceRecommendation:
		req.Reason = ReasonRebalanceRecommended
		if c.opts.Args.RebalanceAction == RebalanceEvent {
			return req, ""
		}
		req.Forceful = false
		req.ReplacementWait = c.opts.Args.RegistrationTimeout.Duration
	}
	if req.ReplacementWait < 0 {
		req.ReplacementWait = 0
	}
	return req, action
}

// act starts what a notice asks for one NodeClaim.
func (c *Controller) act(ctx context.Context, msg Message, claim *stevedorev1.NodeClaim) {
	logger := klog.FromContext(ctx).WithValues("kind", msg.Kind, "nodeclaim", claim.Name, "node", claim.Status.NodeName,
		"instance", claim.Status.InstanceID)
	req, action := c.request(msg, claim)
	if action == "" {
		metrics.InterruptionActions.WithLabelValues(string(msg.Kind), "event").Inc()
		c.event(claim, "the spot instance is at elevated risk of interruption (rebalance recommendation); rebalanceAction is Event: nothing is done")
		logger.Info("Rebalance recommendation recorded")
		return
	}
	c.mu.Lock()
	if c.active[claim.Name] {
		c.mu.Unlock()
		logger.V(1).Info("Interruption of the NodeClaim already in progress")
		return
	}
	c.active[claim.Name] = true
	c.mu.Unlock()
	if msg.Kind == KindSpotInterruption && c.opts.History != nil && claim.Status.InstanceType != "" && claim.Status.Zone != "" {
		// once per NodeClaim: a repeated notice is no new interruption
		c.opts.History.Record(claim.Labels[stevedorev1.LabelNodePool], claim.Status.InstanceType, claim.Status.Zone)
	}
	logger.Info("Interruption notice: replacing and draining the node", "reason", req.Reason, "waitForReplacements", req.ReplacementWait)
	c.event(claim, fmt.Sprintf("%s: replacing and draining the node", msg.Kind))
	c.reportGangs(claim, msg.Kind)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.active, claim.Name)
			c.mu.Unlock()
		}()
		err := c.opts.Interrupter.Interrupt(ctx, req)
		switch {
		case errors.Is(err, disruption.ErrBlocked) || errors.Is(err, disruption.ErrBudget):
			metrics.InterruptionActions.WithLabelValues(string(msg.Kind), "deferred").Inc()
			logger.Info("Rebalance recommendation not acted on now; the node stays until a spot interruption warning", "why", err.Error())
			c.event(claim, "rebalance recommendation not acted on: "+err.Error())
			return
		case err != nil && ctx.Err() == nil:
			metrics.InterruptionActions.WithLabelValues(string(msg.Kind), "failed").Inc()
			logger.Error(err, "Handling an interruption notice failed")
			return
		case err != nil:
			return
		}
		metrics.InterruptionActions.WithLabelValues(string(msg.Kind), action).Inc()
		if !msg.Time.IsZero() && msg.Kind != KindCapacityBlockExpiring { // a block's Time is its end, not a notice's
			metrics.InterruptionLatency.WithLabelValues(string(msg.Kind)).Observe(c.opts.Clock.Since(msg.Time).Seconds())
		}
		logger.Info("Interrupted node is draining", "sinceNotice", c.opts.Clock.Since(msg.Time).Round(time.Millisecond))
	}()
}

func (c *Controller) event(claim *stevedorev1.NodeClaim, note string) {
	if c.opts.Recorder == nil {
		return
	}
	c.opts.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, "Interruption", "Interrupt", "%s", note)
}

// podGroup returns a gang's PodGroup object, of whichever API declares it.
func (c *Controller) podGroup(key gang.Key) (runtime.Object, error) {
	if key.API == gang.Workload {
		if c.opts.WorkloadGroups == nil {
			return nil, fmt.Errorf("PodGroup %s: the Workload API is not served", key)
		}
		return c.opts.WorkloadGroups.Get(key)
	}
	if c.opts.Gangs == nil {
		return nil, fmt.Errorf("PodGroup %s: coscheduling PodGroups are not served", key)
	}
	return c.opts.Gangs.Get(key)
}

// ReasonGangInterrupted is the reason of the event on a PodGroup one of whose nodes is interrupted.
const ReasonGangInterrupted = "GangInterrupted"

// reportGangs records, on the PodGroup of each gang with pods on the claim's node, that the node is interrupted:
// the gang loses those pods, and with them its quorum.
func (c *Controller) reportGangs(claim *stevedorev1.NodeClaim, kind Kind) {
	if c.opts.Recorder == nil || c.opts.Pods == nil || claim.Status.NodeName == "" {
		return
	}
	pods, err := c.opts.Pods.List(labels.Everything())
	if err != nil {
		return
	}
	onNode := map[gang.Key][]string{}
	for _, pod := range pods {
		if key, ok := gang.Of(pod); ok && pod.Spec.NodeName == claim.Status.NodeName && gang.Live(pod) {
			onNode[key] = append(onNode[key], pod.Name)
		}
	}
	keys := slices.SortedFunc(maps.Keys(onNode), func(a, b gang.Key) int { return strings.Compare(a.String(), b.String()) })
	for _, key := range keys {
		pg, err := c.podGroup(key)
		if err != nil {
			continue
		}
		names := onNode[key]
		sort.Strings(names)
		c.opts.Recorder.Eventf(pg, claim, corev1.EventTypeWarning, ReasonGangInterrupted, "Interrupt",
			"%s: node %s (NodeClaim %s) of the gang is being drained; its pods %s stop", kind, claim.Status.NodeName, claim.Name,
			strings.Join(names, ", "))
	}
}
