/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Batching windows: identical CreateFleet requests arriving within fleetBatchWindow of the first share one call;
// terminations within terminateBatchWindow share one TerminateInstances call.
const (
	defaultFleetBatchWindow = 25 * time.Millisecond
	terminateBatchWindow    = 100 * time.Millisecond
	maxTerminateBatch       = 500
	tagWorkers              = 8
)

type fleetRequest struct {
	input     *ec2.CreateFleetInput
	claim     string
	nodePool  string
	overrides []override
	// group and groupSize: the atomic launch the NodeClaim belongs to (AnnotationLaunchGroup), "" for none
	group     string
	groupSize int
}

type fleetError struct {
	instanceType, zone, code, message string
}

type fleetResult struct {
	instanceID string
	errors     []fleetError
}

type fleetMember struct {
	ctx             context.Context
	claim, nodePool string
	done            chan fleetOutcome
}

type fleetOutcome struct {
	result fleetResult
	err    error
}

type fleetBatch struct {
	input   *ec2.CreateFleetInput
	members []fleetMember
	// groupSize is the launch group's size (0 for a batch of ungrouped requests): the batch is sent as soon as
	// that many members have joined, all or nothing
	groupSize int
	timer     *time.Timer
}

// fleetBatcher merges identical concurrent CreateFleet requests into one call with TotalTargetCapacity N. The
// requests of one launch group (a gang's NodeClaims of one shape) wait for each other, at most gatherWindow, and
// share one all-or-nothing call.
type fleetBatcher struct {
	client       *ec2.Client
	window       time.Duration
	gatherWindow time.Duration

	mu      sync.Mutex
	pending map[string]*fleetBatch
}

// defaultGatherWindow bounds how long a launch group's first NodeClaim waits for the others: they are created
// together and launched by parallel workers, so they arrive within a second unless the launch queue is long; the
// group then launches with the members that came (the provisioner rolls back a gang left short).
const defaultGatherWindow = 10 * time.Second

func newFleetBatcher(client *ec2.Client, window time.Duration) *fleetBatcher {
	return &fleetBatcher{client: client, window: window, gatherWindow: defaultGatherWindow, pending: map[string]*fleetBatch{}}
}

// launch joins (or opens) the batch of identical requests and waits for its result.
func (b *fleetBatcher) launch(ctx context.Context, req fleetRequest) (fleetResult, error) {
	raw, err := json.Marshal(req.input) //nolint:gosec // G117: the JSON is only hashed into the batch's key; ClientToken is EC2's idempotency token, not a secret
	if err != nil {
		return fleetResult{}, err
	}
	sum := sha256.Sum256(raw)
	key := hex.EncodeToString(sum[:])
	window := b.window
	if req.group != "" {
		key += "/" + req.group
		window = b.gatherWindow
	}
	member := fleetMember{ctx: ctx, claim: req.claim, nodePool: req.nodePool, done: make(chan fleetOutcome, 1)}
	b.mu.Lock()
	batch, open := b.pending[key]
	if !open {
		batch = &fleetBatch{input: req.input, groupSize: req.groupSize}
		b.pending[key] = batch
		batch.timer = time.AfterFunc(window, func() { b.flush(key, batch) })
	}
	batch.members = append(batch.members, member)
	complete := batch.groupSize > 0 && len(batch.members) >= batch.groupSize
	b.mu.Unlock()
	if complete {
		batch.timer.Stop()
		go b.flush(key, batch) //nolint:gosec // G118: the call serves every member of the group, not the one that completed it; flush bounds it itself
	}
	select {
	case out := <-member.done:
		return out.result, out.err
	case <-ctx.Done():
		return fleetResult{}, ctx.Err()
	}
}

// flush sends a batch: one CreateFleet whose ClientToken is derived from the NodeClaims it launches for, so an SDK
// retry of the same call never launches twice. It then tags each instance with its NodeClaim, whether or not the
// caller still waits: the tag is what a restarted process adopts instead of launching again.
func (b *fleetBatcher) flush(key string, batch *fleetBatch) {
	b.mu.Lock()
	if b.pending[key] != batch {
		b.mu.Unlock()
		return // sent already: the group was complete before its window ended
	}
	delete(b.pending, key)
	b.mu.Unlock()
	// A caller that gave up (its process is stopping) launches nothing.
	batch.members = slices.DeleteFunc(batch.members, func(m fleetMember) bool { return m.ctx.Err() != nil })
	if len(batch.members) == 0 {
		return
	}
	in := batch.fleetInput(key)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := b.client.CreateFleet(ctx, &in)
	if err != nil {
		for _, m := range batch.members {
			m.done <- fleetOutcome{err: fmt.Errorf("CreateFleet: %w", err)}
		}
		return
	}
	errs := fleetErrors(out.Errors)
	var ids []string
	for _, inst := range out.Instances {
		ids = append(ids, inst.InstanceIds...)
	}
	workqueue.ParallelizeUntil(ctx, tagWorkers, min(len(ids), len(batch.members)), func(i int) {
		m := batch.members[i]
		_, err := b.client.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{ids[i]}, Tags: []ec2types.Tag{
			{Key: aws.String(TagNodeClaim), Value: aws.String(m.claim)},
			{Key: aws.String(TagName), Value: aws.String(m.nodePool + "/" + m.claim)},
		}})
		if err != nil {
			klog.Background().Error(err, "Tagging an instance with its NodeClaim failed; garbage collection terminates it if the NodeClaim is lost",
				"instance", ids[i], "nodeclaim", m.claim)
		}
	})
	for i, m := range batch.members {
		res := fleetResult{errors: errs}
		if i < len(ids) {
			res.instanceID = ids[i]
		}
		m.done <- fleetOutcome{result: res}
	}
}

// fleetInput is the batch's CreateFleet: a capacity of one per member (sorted by NodeClaim), a ClientToken derived
// from the NodeClaims, and all or nothing for a launch group of more than one.
func (batch *fleetBatch) fleetInput(key string) ec2.CreateFleetInput {
	sort.Slice(batch.members, func(i, j int) bool { return batch.members[i].claim < batch.members[j].claim })
	claims := make([]string, len(batch.members))
	for i, m := range batch.members {
		claims[i] = m.claim
	}
	tokenSum := sha256.Sum256([]byte(key + "/" + strings.Join(claims, ",")))
	in := *batch.input
	tcs := *in.TargetCapacitySpecification
	n := int32(len(batch.members)) //nolint:gosec // G115: one member per launch call waiting in this process, far fewer than 2^31
	tcs.TotalTargetCapacity = aws.Int32(n)
	in.TargetCapacitySpecification = &tcs
	in.ClientToken = aws.String(hex.EncodeToString(tokenSum[:16]))
	if batch.groupSize > 0 && n > 1 {
		allOrNothing(&in, n)
	}
	return in
}

// fleetErrors reads CreateFleet's errors with the instance type and zone each names.
func fleetErrors(in []ec2types.CreateFleetError) []fleetError {
	var errs []fleetError
	for _, e := range in {
		fe := fleetError{code: aws.ToString(e.ErrorCode), message: aws.ToString(e.ErrorMessage)}
		if lto := e.LaunchTemplateAndOverrides; lto != nil && lto.Overrides != nil {
			fe.instanceType, fe.zone = string(lto.Overrides.InstanceType), aws.ToString(lto.Overrides.AvailabilityZone)
		}
		errs = append(errs, fe)
	}
	return errs
}

// allOrNothing makes an instant fleet launch n instances or none: MinTargetCapacity n, with the single instance
// type and single zone EC2 requires beside it (a gang's nodes of one shape are one type in one zone), in the
// options of the fleet's capacity type.
func allOrNothing(in *ec2.CreateFleetInput, n int32) {
	if in.TargetCapacitySpecification.DefaultTargetCapacityType == ec2types.DefaultTargetCapacityTypeSpot {
		opts := ec2types.SpotOptionsRequest{}
		if in.SpotOptions != nil {
			opts = *in.SpotOptions
		}
		opts.MinTargetCapacity, opts.SingleInstanceType, opts.SingleAvailabilityZone = aws.Int32(n), aws.Bool(true), aws.Bool(true)
		in.SpotOptions = &opts
		return
	}
	opts := ec2types.OnDemandOptionsRequest{}
	if in.OnDemandOptions != nil {
		opts = *in.OnDemandOptions
	}
	opts.MinTargetCapacity, opts.SingleInstanceType, opts.SingleAvailabilityZone = aws.Int32(n), aws.Bool(true), aws.Bool(true)
	in.OnDemandOptions = &opts
}

// terminateBatcher merges terminations into TerminateInstances calls.
type terminateBatcher struct {
	client *ec2.Client

	mu      sync.Mutex
	pending map[string][]chan error
	armed   bool
}

func newTerminateBatcher(client *ec2.Client) *terminateBatcher {
	return &terminateBatcher{client: client, pending: map[string][]chan error{}}
}

func (t *terminateBatcher) terminate(ctx context.Context, id string) error {
	done := make(chan error, 1)
	t.mu.Lock()
	t.pending[id] = append(t.pending[id], done)
	if !t.armed {
		t.armed = true
		time.AfterFunc(terminateBatchWindow, t.flush)
	}
	t.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *terminateBatcher) flush() {
	t.mu.Lock()
	pending := t.pending
	t.pending = map[string][]chan error{}
	t.armed = false
	t.mu.Unlock()
	ids := sortedKeysOf(pending)
	for start := 0; start < len(ids); start += maxTerminateBatch {
		chunk := ids[start:min(len(ids), start+maxTerminateBatch)]
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := t.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: chunk})
		if err != nil && isNotFound(err) && len(chunk) > 1 {
			// one vanished instance fails the whole call: terminate the rest one by one
			for _, id := range chunk {
				_, e := t.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
				if isNotFound(e) {
					e = nil
				}
				notify(pending[id], e)
			}
			cancel()
			continue
		}
		cancel()
		if isNotFound(err) {
			err = nil
		}
		for _, id := range chunk {
			if err != nil {
				notify(pending[id], fmt.Errorf("TerminateInstances: %w", err))
			} else {
				notify(pending[id], nil)
			}
		}
	}
}

func notify(chans []chan error, err error) {
	for _, c := range chans {
		c <- err
	}
}
